import postgres, { type Sql, type TransactionSql } from 'postgres';
import { type Logger, redactUrl } from '../../support/log.js';
import { INSTANCE_ID, SESSION_PREFIX, sessionName } from './instance.js';
import { freshConnectionChecks, StaleConnectionWatch } from './stale-connections.js';

export type { Sql };
/** A transaction handle; functions that must run inside one take this. */
export type Tx = TransactionSql;
/** Either: for reads that run alone or inside a transaction. */
export type Db = Sql | TransactionSql;

export interface ConnectOptions {
  readonly max?: number;
  readonly applicationName?: string;
  /**
   * Appended to application_name as `@id` (src/store/pg/instance.ts). Default: this process's
   * instance id for the daemon's own names (those starting with `coverage-rollup`), none for
   * others; null: none.
   */
  readonly instanceId?: string | null;
  /** Seconds to wait for a connection (postgres.js defaults to 30). */
  readonly connectTimeout?: number;
  /** The server ends a transaction left idle this long (idle_in_transaction_session_timeout). */
  readonly idleInTransactionTimeoutMs?: number;
  /** Every transaction read-only (default_transaction_read_only): the replica pool never writes. */
  readonly readOnly?: boolean;
  /**
   * Give up a connection whose statement goes unanswered this long while its backend is not
   * working on it and a fresh connection answers (a stale flow: src/store/pg/stale-connections.ts).
   */
  readonly staleAfterMs?: number;
  /** Where stale connections are reported; needed with staleAfterMs. */
  readonly log?: Logger;
  /** Commits that do not wait for the WAL flush (synchronous_commit off): only for redoable work. */
  readonly asyncCommit?: boolean;
}

export function connect(
  url: string,
  {
    max = 10,
    applicationName = SESSION_PREFIX,
    instanceId = applicationName.startsWith(SESSION_PREFIX) ? INSTANCE_ID : null,
    connectTimeout,
    idleInTransactionTimeoutMs,
    readOnly = false,
    staleAfterMs,
    log,
    asyncCommit = false,
  }: ConnectOptions = {},
): Sql {
  const [target, socket] = withSocket(url);
  const watch =
    staleAfterMs === undefined || log === undefined
      ? undefined
      : new StaleConnectionWatch({ boundMs: staleAfterMs, log, ...freshConnectionChecks(url, connectOnce) });
  const sql = postgres(target, {
    ...socket,
    ...(watch ? { socket: watch.socket } : {}),
    max,
    backoff: reconnectBackoff,
    ...(connectTimeout === undefined ? {} : { connect_timeout: connectTimeout }),
    onnotice: () => {},
    connection: {
      application_name: instanceId === null ? applicationName : sessionName(applicationName, instanceId),
      // Every statement here reads a handful of rows through an index. On tables never analyzed
      // the planner's cost estimates can pass jit_above_cost by orders of magnitude, and compiling
      // then costs up to a second per statement (seen: the freshness read of 2,000 assets).
      jit: 'off',
      ...(idleInTransactionTimeoutMs === undefined
        ? {}
        : { idle_in_transaction_session_timeout: Math.round(idleInTransactionTimeoutMs) }),
      ...(readOnly ? { default_transaction_read_only: true } : {}),
      ...(asyncCommit ? { synchronous_commit: 'off' } : {}),
    },
    // int8 as JS numbers: every value we store is a safe integer (see core/types.ts).
    types: {
      int8: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) },
    },
    transform: { undefined: null },
  });
  if (!watch) return sql;
  // The watch's check connection ends with the pool, or it would keep a stopped process alive.
  const end = sql.end.bind(sql);
  sql.end = async (options) => {
    await watch.close();
    return end(options);
  };
  return sql;
}

/**
 * Seconds before a pool connection that failed reconnects for the statement waiting on it.
 * postgres.js grows this with every failed connection in the pool, up to 20 s, and resets it only
 * on a successful start: after a burst of killed backends a transaction's begin waited 16.8 s with
 * the server answering again. Every caller here retries on its own backoff, so the pool's need
 * only spread reconnects: at most 1 s.
 */
function reconnectBackoff(failures: number): number {
  return (0.5 + Math.random() / 2) * Math.min(0.05 * 2 ** failures, 1);
}

/** A short-lived single connection for administrative statements (create/drop database). */
export function connectOnce(url: string, options: { connect_timeout?: number } = {}): Sql {
  const [target, socket] = withSocket(url);
  return postgres(target, { ...socket, max: 1, onnotice: () => {}, ...options });
}

/**
 * libpq's `?host=` parameter, e.g. `postgres:///coverage_rollup?host=/var/run/postgresql` for a Unix
 * socket directory. postgres.js reads only the URL's host and would send `host` to the server as a
 * setting, so it moves to the host option (a host with a slash is a socket directory to it).
 */
function withSocket(url: string): [string, { host?: string }] {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return [url, {}]; // postgres.js reports the unparsable URL itself
  }
  const host = parsed.searchParams.get('host');
  if (!host) return [url, {}];
  parsed.searchParams.delete('host');
  return [parsed.toString(), { host }];
}

export class DatabaseUnavailableError extends Error {
  override readonly name = 'DatabaseUnavailableError';
}

/**
 * A newcomer's first start must not stop at "database does not exist": create it when the role
 * may, otherwise say what to run.
 */
export async function ensureDatabase(url: string, log: Logger): Promise<void> {
  const probe = connectOnce(url, { connect_timeout: 10 });
  try {
    await probe`select 1`;
    return;
  } catch (error) {
    if ((error as { code?: string }).code !== '3D000') throw unavailable(url, error);
  } finally {
    await probe.end({ timeout: 1 });
  }
  const name = databaseName(url);
  const adminUrl = new URL(url);
  adminUrl.pathname = '/postgres';
  const admin = connectOnce(adminUrl.toString());
  try {
    await admin`create database ${admin(name)}`;
    log.info({ database: name }, 'created database (it did not exist)');
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === '42P04') return; // created by a concurrent starter
    if (code === '42501') {
      // Owned by the daemon's role: since PostgreSQL 15 only the owner may create in schema public.
      const [{ role }] = await admin<[{ role: string }]>`select current_user as role`;
      throw new DatabaseUnavailableError(
        `database "${name}" does not exist and role ${role} may not create it; run: createdb -O ${role} ${name} (as a role that may), then start again`,
      );
    }
    // The failed login here is to the postgres database, not the one the daemon was given.
    throw unavailable(adminUrl.toString(), error);
  } finally {
    await admin.end({ timeout: 1 });
  }
}

function databaseName(url: string): string {
  const name = decodeURIComponent(new URL(url).pathname.replace(/^\//, ''));
  if (!name) throw new DatabaseUnavailableError(`database_url ${redactUrl(url)} names no database`);
  return name;
}

/**
 * Says which side failed: a server that answered with an authorization error (SQLSTATE class 28:
 * no such role, a wrong password, no pg_hba.conf entry) was reached, and the fix is the login, not
 * the network.
 */
function unavailable(url: string, error: unknown): DatabaseUnavailableError {
  const code = (error as { code?: unknown }).code;
  const message = (error as Error).message;
  if (typeof code === 'string' && code.startsWith('28')) {
    return new DatabaseUnavailableError(`PostgreSQL at ${redactUrl(url)} refused the login: ${message}`);
  }
  return new DatabaseUnavailableError(`cannot reach PostgreSQL at ${redactUrl(url)}: ${message}`);
}

/**
 * The database's clock, the one `ingested_at` and `now()` are written by: the scheduler's default
 * "now", so settle and deadlines never mix two clocks.
 */
export async function databaseNow(db: Db): Promise<Date> {
  const [clock] = await db<{ now: Date }[]>`select clock_timestamp() as now`;
  return clock!.now;
}

/** Resolves once the server answers a trivial statement (readiness checks, probes). */
export async function ping(db: Db): Promise<void> {
  await db`select 1`;
}

/** Drops database `name` of the server `adminUrl` points at, ending its sessions (the demo's reset). */
export async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  const admin = connectOnce(adminUrl);
  try {
    await admin`drop database if exists ${admin(name)} with (force)`;
  } finally {
    await admin.end();
  }
}
