/**
 * The running daemon's record in its data directory, `daemon.json`: how a command or a producer on
 * this machine finds the daemon it was started beside (its HTTP address, its config file, where its
 * queues are) without being told. `coverage-rollup start` writes it whole (a temporary file
 * renamed over it) once the daemon is ready and removes it at a clean stop; a record whose pid is
 * gone was left by a daemon that was killed, and is ignored. The format is documented in
 * docs/operations.md for other readers (the example producers, the Python client).
 */
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { isAlive } from './pid.js';

/** `data_dir`'s default: relative to the directory the daemon (or the command) runs in. */
export const DEFAULT_DATA_DIR = './.coverage-rollup';
export const RECORD_FILE = 'daemon.json';
/** Bumped only when a field changes meaning; fields are only ever added. */
export const RECORD_FORMAT = 1;

export interface DaemonRecord {
  readonly format: typeof RECORD_FORMAT;
  readonly pid: number;
  readonly started_at: string;
  /** The config file's absolute path; null when the daemon runs on the defaults. */
  readonly config: string | null;
  /** Where this machine reaches its HTTP API, e.g. http://127.0.0.1:8080 (no trailing slash). */
  readonly url: string;
  /**
   * A token this daemon accepts for every API call, made anew at each start, for its own user's
   * commands on this machine (the file is readable by that user only).
   */
  readonly token: string;
  /** Its database for messages, the password masked. */
  readonly database: string;
  /** Its database URL when it holds no password of the user's: the embedded server's, or one without a password. */
  readonly database_url: string | null;
  /** Its Redis URL on the Redis backend, when it holds no password; else null. */
  readonly redis_url: string | null;
  /** What a producer needs to reach its events queue. */
  readonly queue: {
    readonly backend: 'redis' | 'postgres';
    readonly name: string;
    readonly dead_letter: string;
    readonly prefix: string;
    readonly groups: number;
  };
}

/** The data directory a command looks in: COVERAGE_ROLLUP_DATA_DIR, else ./.coverage-rollup. */
export function dataDirOf(env: NodeJS.ProcessEnv = process.env): string {
  return resolve(env.COVERAGE_ROLLUP_DATA_DIR || DEFAULT_DATA_DIR);
}

export function recordPath(dataDir: string): string {
  return join(resolve(dataDir), RECORD_FILE);
}

export type RecordLookup =
  | { readonly kind: 'live'; readonly record: DaemonRecord; readonly path: string }
  | { readonly kind: 'stale'; readonly pid: number; readonly path: string }
  | { readonly kind: 'none'; readonly path: string };

/** The record in `dataDir`, and whether its daemon still runs. An unreadable record counts as none. */
export function lookUpRecord(dataDir: string): RecordLookup {
  const path = recordPath(dataDir);
  let record: DaemonRecord;
  try {
    record = JSON.parse(readFileSync(path, 'utf8')) as DaemonRecord;
  } catch {
    return { kind: 'none', path };
  }
  if (
    record === null ||
    typeof record !== 'object' ||
    typeof record.pid !== 'number' ||
    typeof record.url !== 'string'
  )
    return { kind: 'none', path };
  if (!isAlive(record.pid)) return { kind: 'stale', pid: record.pid, path };
  return { kind: 'live', record, path };
}

/** Written whole or not at all, readable by its owner only (it holds a token); `dataDir` must exist. */
export function writeRecord(dataDir: string, record: DaemonRecord): void {
  const path = recordPath(dataDir);
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
  renameSync(tmp, path);
}

/** Removes the record if it is this pid's (another daemon's record is left alone). */
export function removeRecord(dataDir: string, pid: number): void {
  const found = lookUpRecord(dataDir);
  if (found.kind === 'live' && found.record.pid === pid) rmSync(found.path, { force: true });
}
