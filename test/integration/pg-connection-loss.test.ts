/**
 * postgres.js 3.4.9 as patched here (patches/postgres+3.4.9.patch) and configured by connect():
 * a pool whose backend is terminated mid-statement still ends, and a pool does not wait out
 * postgres.js's own reconnect backoff (up to 20 s) after a burst of failed connections.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { connect, connectOnce } from '../../src/store/pg/db.js';
import { ADMIN_URL } from '../helpers/env.js';
import { waitFor } from '../helpers/wait.js';

const admin = connectOnce(ADMIN_URL);
afterAll(() => admin.end({ timeout: 5 }));

/** Terminates the pool's backend once it is running the statement (not while it starts up). */
async function terminateSleeper(applicationName: string): Promise<number> {
  const [row] = await admin<{ n: number }[]>`
    select count(pg_terminate_backend(pid))::int as n from pg_stat_activity
    where application_name = ${applicationName} and state = 'active' and query like '%pg_sleep%'`;
  return row?.n ?? 0;
}

describe('PostgreSQL connections lost', () => {
  it('a pool whose backend was terminated mid-statement ends without a timeout', async () => {
    const name = `cr-loss-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
    const sql = connect(ADMIN_URL, { max: 1, applicationName: name });
    const sleeping = sql`select pg_sleep(30)`.execute();
    const failed = sleeping.then(
      () => null,
      (error: unknown) => error,
    );
    await waitFor(async () => (await terminateSleeper(name)) > 0, {
      what: 'the sleeping backend to be terminated',
    });
    // 57P01, ECONNRESET or CONNECTION_CLOSED, depending on what reached the socket first.
    expect(await failed).toBeInstanceOf(Error);
    // Unpatched, the connection keeps the failed statement as its current one and end() waits for
    // it forever (porsager/postgres#1097).
    let ended = false;
    void sql.end().then(() => {
      ended = true;
    });
    await waitFor(() => ended, { timeout: 10_000, what: 'the pool to end' });
  });

  it('reconnects a failed pool connection within a second, however many failed before', () => {
    const sql = connect(ADMIN_URL, { max: 1 });
    const backoff = sql.options.backoff as (failures: number) => number;
    for (const failures of [0, 1, 5, 10, 100]) expect(backoff(failures)).toBeLessThanOrEqual(1);
    // postgres.js's default waits 10-20 s from the seventh.
    expect(backoff(0)).toBeGreaterThan(0);
    return sql.end({ timeout: 1 });
  });
});
