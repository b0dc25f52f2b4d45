/**
 * The embedded PostgreSQL's files in the data directory: the cluster, what the server
 * was set up with (server.json: port, role, password), the daemon that owns it, and its log.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { isAlive } from '../support/pid.js';

export interface DataDir {
  readonly root: string;
  /** PGDATA: the cluster, owned by the server's user. */
  readonly cluster: string;
  readonly serverJson: string;
  /** The pid of the daemon that stops the server when it exits. */
  readonly daemonPid: string;
  readonly serverLog: string;
}

/**
 * `mkdir -p` one directory at a time. Node 20's `mkdirSync(path, {recursive: true})` loops forever
 * where the kernel answers ENOENT for a parent that exists (a data_dir under /proc): the daemon
 * spun at 100 % CPU in that synchronous call, printing nothing and deaf to SIGTERM. Here the
 * first directory that cannot be made throws its error.
 */
export function makeDirectory(path: string, mode: number): void {
  const missing: string[] = [];
  for (let dir = resolve(path); !existsSync(dir); dir = dirname(dir)) {
    missing.unshift(dir);
    if (dirname(dir) === dir) break;
  }
  for (const dir of missing) {
    try {
      mkdirSync(dir, { mode });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
}

export function dataDir(path: string): DataDir {
  const root = resolve(path);
  return {
    root,
    cluster: join(root, 'pg'),
    serverJson: join(root, 'server.json'),
    daemonPid: join(root, 'daemon.pid'),
    serverLog: join(root, 'server.log'),
  };
}

/** What the cluster was initialised with; the port is the one it listened on last. */
export interface ServerRecord {
  readonly port: number;
  readonly user: string;
  readonly password: string;
  readonly database: string;
}

export function readServerRecord(dir: DataDir): ServerRecord | undefined {
  if (!existsSync(dir.serverJson)) return undefined;
  return JSON.parse(readFileSync(dir.serverJson, 'utf8')) as ServerRecord;
}

/** Written whole or not at all (a kill between write and rename leaves the old record). */
export function writeServerRecord(dir: DataDir, record: ServerRecord): void {
  const tmp = `${dir.serverJson}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
  renameSync(tmp, dir.serverJson);
}

/** The postmaster's pid, port and status from postmaster.pid, while that file exists. */
export interface PostmasterFile {
  readonly pid: number;
  readonly port: number;
  /** `ready`, `starting`, `stopping` or `standby` (the file's eighth line). */
  readonly status: string;
}

export function readPostmasterFile(dir: DataDir): PostmasterFile | undefined {
  let text: string;
  try {
    text = readFileSync(join(dir.cluster, 'postmaster.pid'), 'utf8');
  } catch {
    return undefined;
  }
  const lines = text.split('\n');
  const pid = Number(lines[0]);
  if (!Number.isSafeInteger(pid) || pid <= 0) return undefined; // being written
  return { pid, port: Number(lines[3]), status: (lines[7] ?? '').trim() };
}

export function removePostmasterFile(dir: DataDir): void {
  rmSync(join(dir.cluster, 'postmaster.pid'), { force: true });
}

export function readDaemonPid(dir: DataDir): number | undefined {
  try {
    const pid = Number(readFileSync(dir.daemonPid, 'utf8').trim());
    return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

export function writeDaemonPid(dir: DataDir, pid: number): void {
  writeFileSync(dir.daemonPid, `${pid}\n`);
}

export function removeDaemonPid(dir: DataDir, pid: number): void {
  if (readDaemonPid(dir) === pid) rmSync(dir.daemonPid, { force: true });
}

/**
 * Whether the pid is a PostgreSQL server: a postmaster.pid left by a server killed with the
 * machine may name a pid the system has since given to another program. Where /proc is missing
 * (macOS) a live pid is taken for the server.
 */
export function isPostgres(pid: number): boolean {
  if (!isAlive(pid)) return false;
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('postgres');
  } catch {
    return !existsSync('/proc/self');
  }
}
