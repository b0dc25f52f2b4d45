import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { appendFileSync, chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { connectOnce } from '../../src/store/pg/db.js';
import { freePort } from './ports.js';
import { waitFor } from './wait.js';

/**
 * A real PostgreSQL primary and a streaming replica of it, on free local ports: `initdb` a fresh
 * cluster set up for replication, `pg_basebackup -R` it into a second data directory (which makes
 * that a standby following the primary), start both. The server binaries come from PG_BIN, else
 * `pg_config --bindir` (on Debian /usr/lib/postgresql/N/bin: the /usr/bin names are wrappers for
 * the distribution's own clusters). PostgreSQL refuses to run as root, so as root (CI) every
 * command runs as the `postgres` OS user through runuser.
 */

const run = promisify(execFile);

export const PG_BIN = process.env.PG_BIN ?? pgConfigBindir();

function pgConfigBindir(): string | undefined {
  const result = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' });
  return result.status === 0 ? result.stdout.trim() : undefined;
}

const asRoot = userInfo().uid === 0;

/** Whether a primary and replica can be started here: the tests skip, saying so, only when not. */
export const hasPostgresServer =
  PG_BIN !== undefined &&
  ['initdb', 'pg_ctl', 'pg_basebackup'].every((b) => existsSync(join(PG_BIN!, b))) &&
  (!asRoot || spawnSync('id', ['-u', 'postgres']).status === 0);

export interface LocalReplicaPair {
  readonly primaryPort: number;
  readonly replicaPort: number;
  /** A URL of `database` on the primary or the replica (user postgres, trust). */
  primaryUrl(database: string): string;
  replicaUrl(database: string): string;
  /** Creates a database on the primary and waits until the replica has it. */
  createDatabase(name: string): Promise<void>;
  /** Stops applying WAL on the replica (it keeps receiving it), and starts again. */
  pauseReplay(): Promise<void>;
  resumeReplay(): Promise<void>;
  /** Stops the replica server (fast shutdown) and starts it again. */
  stopReplica(): Promise<void>;
  startReplica(): Promise<void>;
  /** Stops both servers and removes their directories. */
  stop(): Promise<void>;
}

const started = new Set<string>();
// A run that dies before its afterAll still leaves no server behind.
process.once('exit', () => {
  for (const data of started) spawnSync(...command('pg_ctl', ['-D', data, '-m', 'immediate', 'stop']));
});

function command(bin: string, args: string[]): [string, string[]] {
  const path = join(PG_BIN!, bin);
  return asRoot ? ['runuser', ['-u', 'postgres', '--', path, ...args]] : [path, args];
}

async function pg(bin: string, args: string[]): Promise<void> {
  const [file, argv] = command(bin, args);
  await run(file, argv, { timeout: 60_000 });
}

/** Settings for a throwaway cluster: replication on, durability off, small. */
function settings(port: number, socketDir: string): string {
  return [
    `port = ${port}`,
    `listen_addresses = '127.0.0.1'`,
    `unix_socket_directories = '${socketDir}'`,
    'wal_level = replica',
    'max_wal_senders = 4',
    'max_connections = 200',
    'shared_buffers = 32MB',
    'fsync = off',
    'full_page_writes = off',
    // Vacuum on the primary then never cancels a read on the replica (docs/operations.md "A read replica").
    'hot_standby_feedback = on',
    '',
  ].join('\n');
}

export async function startReplicaPair(): Promise<LocalReplicaPair> {
  if (!hasPostgresServer) throw new Error('no PostgreSQL server binaries (set PG_BIN)');
  // As root the servers run as postgres, who must reach the directory: /tmp is open to all, a
  // TMPDIR under /root would not be.
  const dir = mkdtempSync(join(asRoot ? '/tmp' : tmpdir(), 'coverage-rollup-replica-'));
  if (asRoot) {
    const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }));
    chownSync(dir, id('-u'), id('-g'));
  }
  const primaryData = join(dir, 'primary');
  const replicaData = join(dir, 'replica');
  const [primaryPort, replicaPort] = [await freePort(), await freePort()];
  const ctl = (data: string, action: 'start' | 'stop', mode = 'fast') =>
    action === 'start'
      ? pg('pg_ctl', ['-D', data, '-l', `${data}.log`, '-w', '-t', '60', 'start'])
      : pg('pg_ctl', ['-D', data, '-m', mode, '-w', 'stop']);
  const url = (port: number, database: string) => `postgres://postgres@127.0.0.1:${port}/${database}`;
  const ask = async <T>(port: number, question: (sql: ReturnType<typeof connectOnce>) => Promise<T>) => {
    const sql = connectOnce(url(port, 'postgres'), { connect_timeout: 5 });
    try {
      return await question(sql);
    } finally {
      await sql.end({ timeout: 1 });
    }
  };

  const stop = async () => {
    for (const data of [replicaData, primaryData]) {
      if (!started.delete(data)) continue;
      await ctl(data, 'stop', 'immediate').catch(() => {});
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    // initdb's trust also covers replication connections from 127.0.0.1.
    await pg('initdb', ['-D', primaryData, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-sync']);
    appendFileSync(primaryData + '/postgresql.conf', settings(primaryPort, dir));
    started.add(primaryData);
    await ctl(primaryData, 'start');
    // -R writes primary_conninfo and standby.signal: the copy starts as a standby of the primary.
    // biome-ignore format: flag/value pairs read best one pair per line
    await pg('pg_basebackup', [
      '-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres',
      '-D', replicaData, '-R', '-X', 'stream', '-c', 'fast', '--no-sync',
    ]);
    appendFileSync(replicaData + '/postgresql.conf', settings(replicaPort, dir));
    started.add(replicaData);
    await ctl(replicaData, 'start');
    await waitFor(
      () =>
        ask(primaryPort, (sql) => sql`select 1 from pg_stat_replication where state = 'streaming'`).then(
          (rows) => rows.length === 1,
        ),
      { timeout: 30_000, interval: 50, what: 'the replica to stream from the primary' },
    );
  } catch (error) {
    await stop();
    throw error;
  }

  return {
    primaryPort,
    replicaPort,
    primaryUrl: (database) => url(primaryPort, database),
    replicaUrl: (database) => url(replicaPort, database),
    async createDatabase(name) {
      await ask(primaryPort, (sql) => sql`create database ${sql(name)}`);
      await waitFor(
        () =>
          ask(replicaPort, (sql) => sql`select 1 from pg_database where datname = ${name}`).then(
            (r) => r.length,
          ),
        { timeout: 30_000, interval: 25, what: `database ${name} on the replica` },
      );
    },
    pauseReplay: () => ask(replicaPort, (sql) => sql`select pg_wal_replay_pause()`).then(() => {}),
    resumeReplay: () => ask(replicaPort, (sql) => sql`select pg_wal_replay_resume()`).then(() => {}),
    async stopReplica() {
      await ctl(replicaData, 'stop');
      started.delete(replicaData);
    },
    async startReplica() {
      started.add(replicaData);
      await ctl(replicaData, 'start');
    },
    stop,
  };
}
