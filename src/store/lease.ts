import type { Sql, Tx } from './pg/db.js';

/**
 * The lease's statements, one each. Every time is clock_timestamp(): database time at
 * the moment the statement looks, not the start of its transaction. Acquire, renew and release
 * run alone, never inside sql.begin(): postgres.js 3.4.9 crashes the process (an uncaught
 * TypeError in nextWrite) when a backend dies during a query in a transaction, and a lease must
 * survive exactly that. They return the pending query so the caller can cancel() it on timeout.
 */

const ttl = (sql: Sql, ttlMs: number) => sql`clock_timestamp() + ${ttlMs}::float8 * interval '1 millisecond'`;

/**
 * Takes the row when it is free, expired, or already this holder's. Every acquisition bumps the
 * token, a reacquisition by the same holder too: it may have lost the lease in between. Returns
 * the new token and the holder the row named before (null for a new row), or no row while
 * another holder's lease is live.
 */
export function acquireLease(sql: Sql, name: string, holder: string, ttlMs: number) {
  return sql<{ token: number; previous: string | null }[]>`
    with before as (select holder from scheduler_leases where name = ${name})
    insert into scheduler_leases as l (name, holder, token, acquired_at, renewed_at, expires_at)
    values (${name}, ${holder}, 1, clock_timestamp(), clock_timestamp(), ${ttl(sql, ttlMs)})
    on conflict (name) do update
      set holder = excluded.holder,
          token = l.token + 1,
          acquired_at = clock_timestamp(),
          renewed_at = clock_timestamp(),
          expires_at = ${ttl(sql, ttlMs)}
      where l.expires_at is null or l.expires_at <= clock_timestamp() or l.holder = excluded.holder
    returning token, (select holder from before) as previous`;
}

/** Extends a live lease this holder has under this token; no row when it is gone or expired. */
export function renewLease(sql: Sql, name: string, holder: string, token: number, ttlMs: number) {
  return sql<{ token: number }[]>`
    update scheduler_leases set renewed_at = clock_timestamp(), expires_at = ${ttl(sql, ttlMs)}
    where name = ${name} and holder = ${holder} and token = ${token} and expires_at > clock_timestamp()
    returning token`;
}

/** Ends a live lease now, so a standby takes over on its next attempt. The row stays for the record. */
export function releaseLease(sql: Sql, name: string, holder: string, token: number) {
  return sql<{ token: number }[]>`
    update scheduler_leases set expires_at = clock_timestamp()
    where name = ${name} and holder = ${holder} and token = ${token} and expires_at > clock_timestamp()
    returning token`;
}

/**
 * Inside a trigger transaction: true while `token` is the current, unexpired one. FOR KEY SHARE
 * holds the row until commit against an acquisition (it changes token, a key column through the
 * scheduler_leases_fence constraint) but not against renewals, so busy triggering never delays
 * the holder's own renewals and no new holder can exist before this transaction commits.
 */
export async function checkLease(tx: Tx, name: string, token: number): Promise<boolean> {
  const rows = await tx`
    select token from scheduler_leases
    where name = ${name} and token = ${token} and expires_at > clock_timestamp()
    for key share`;
  return rows.length === 1;
}

/**
 * Runs one lease statement, cancelled after `ms` (lock waits included: an acquisition waits for
 * the old holder's trigger transactions); should the network hang, abandoned a little later.
 */
export async function bounded<T>(ms: number, query: PromiseLike<T> & { cancel(): unknown }): Promise<T> {
  const pending = Promise.resolve(query);
  pending.catch(() => {}); // abandoned if the guard wins; it settles harmlessly later
  let cancelled = false;
  const limit = 2 * ms + 1000;
  let cancel: NodeJS.Timeout | undefined;
  let abandon: NodeJS.Timeout | undefined;
  const guard = new Promise<never>((_, reject) => {
    cancel = setTimeout(() => {
      cancelled = true;
      query.cancel();
    }, ms);
    abandon = setTimeout(() => reject(new Error(`no answer from PostgreSQL in ${limit} ms`)), limit);
  });
  try {
    return await Promise.race([pending, guard]);
  } catch (error) {
    if (cancelled && (error as { code?: string }).code === '57014')
      throw new Error(`lease statement timed out after ${Math.round(ms)} ms`);
    throw error;
  } finally {
    clearTimeout(cancel);
    clearTimeout(abandon);
  }
}

/**
 * Ends the sessions of a former holder that still hold the lease row after the lease expired: a
 * paused process mid-transaction (waiting on its client, where no server timeout applies) would
 * otherwise block every takeover until it resumes. Terminating only rolls back uncommitted work,
 * and a transaction that holds the row after expiry can only belong to a fenced holder.
 */
export async function endExpiredHolderSessions(sql: Sql, name: string): Promise<number> {
  const rows = await sql`
    select pg_terminate_backend(l.pid)
    from pg_locks l
    where l.database = (select oid from pg_database where datname = current_database())
      and l.relation = 'scheduler_leases'::regclass and l.granted and l.pid <> pg_backend_pid()
      and exists (select 1 from scheduler_leases where name = ${name} and expires_at <= clock_timestamp())`;
  return rows.length;
}
