/**
 * postgres.js 3.4.9 as patched here (patches/postgres+3.4.9.patch) and configured by connect():
 * a pool whose backend is terminated mid-statement still ends, a pool does not wait out
 * postgres.js's own reconnect backoff (up to 20 s) after a burst of failed connections, and a
 * connection terminated while it fetches array types fetches them again when it reconnects.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { connect, connectOnce } from '../../src/store/pg/db.js';
import { createTestDatabase } from '../helpers/db.js';
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

  it('a connection terminated while it fetches array types fetches them when it reconnects', async () => {
    // Its own database: pg_type is locked below, which would hold up every new connection to it.
    const db = await createTestDatabase();
    const name = `cr-types-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
    const sql = connect(db.url, { max: 1, applicationName: name });
    // Released in finally too: a failed wait must not leave pg_type locked for the rest of the file.
    let release = () => {};
    let holder: Promise<unknown> = Promise.resolve();
    try {
      // A new connection fetches the array types before its first statement; hold that fetch up
      // on a lock, so the backend can be terminated right then (as ingest-pg-outage's killer
      // does when it lands there by chance).
      let locked = () => {};
      const isLocked = new Promise<void>((resolve) => {
        locked = resolve;
      });
      holder = db.sql.begin(async (tx) => {
        await tx`lock table pg_catalog.pg_type in access exclusive mode`;
        locked();
        await new Promise<void>((resolve) => {
          release = resolve;
        });
      });
      await isLocked;
      const statement = (s: typeof sql) =>
        s.begin(
          (tx) => tx<{ names: string[]; ids: number[] }[]>`
          select ${['a', 'b']}::text[] as names, ${[1, 2]}::int8[] as ids`,
        );
      const first = statement(sql).then(
        (rows) => rows,
        (error: unknown) => error,
      );
      await waitFor(
        async () => {
          const [row] = await admin<{ n: number }[]>`
            select count(pg_terminate_backend(pid))::int as n from pg_stat_activity
            where application_name = ${name} and wait_event_type = 'Lock' and query like '%typcategory%'`;
          return (row?.n ?? 0) > 0;
        },
        { what: 'the backend fetching array types to be terminated' },
      );
      release();
      await holder;
      // Unpatched, the reconnect's first ReadyForQuery settled the dead socket's fetch in place of
      // its own start: this transaction failed with the old backend's 57P01, and the connection
      // opened without array types, so every array parameter went out as "a,b" and failed with
      // 22P02 (malformed array literal), a failure no caller retries.
      expect(await first).toEqual([{ names: ['a', 'b'], ids: [1, 2] }]);
      expect(await statement(sql)).toEqual([{ names: ['a', 'b'], ids: [1, 2] }]);
    } finally {
      release();
      await holder;
      await sql.end({ timeout: 1 });
    }
  });
});
