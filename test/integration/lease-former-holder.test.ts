import { afterAll, describe, expect, it } from 'vitest';
import { endFormerHolderSessions } from '../../src/lease/former-holder.js';
import { postgresLeaseStore } from '../../src/lease/store.js';
import { connect, type Sql } from '../../src/store/pg/db.js';
import { createTestDatabase } from '../helpers/db.js';
import { uniqueName } from '../helpers/env.js';
import { waitFor } from '../helpers/wait.js';

/**
 * Which sessions a new lease holder ends after a takeover (src/lease/former-holder.ts): the
 * former holder's instance's, in a transaction, waiting on their client or a lock for at least
 * the bound; and what happens when PostgreSQL refuses (another role's session).
 */

const db = await createTestDatabase();
const pools: Sql[] = [];
afterAll(async () => {
  for (const pool of pools) await pool.end({ timeout: 1 });
});

/** A session named like a daemon's of `instance`, left idle in a transaction; answers its pid. */
async function idleInTransaction(instance: string, url = db.url): Promise<number> {
  const sql = connect(url, { max: 1, applicationName: 'coverage-rollup', instanceId: instance });
  pools.push(sql);
  let opened!: (pid: number) => void;
  const pid = new Promise<number>((resolve) => {
    opened = resolve;
  });
  void sql
    .begin(async (tx) => {
      const [row] = await tx<{ pid: number }[]>`select pg_backend_pid() as pid`;
      opened(row!.pid);
      await new Promise(() => {}); // never ends on its own
    })
    .catch(() => {});
  return pid;
}

async function alive(pid: number): Promise<boolean> {
  const [row] = await db.sql`select 1 from pg_stat_activity where pid = ${pid}`;
  return row !== undefined;
}

describe('ending the former lease holder sessions', () => {
  it("ends only the former instance's sessions stuck in a transaction for the bound", async () => {
    const stuck = await idleInTransaction('f0f0f0f0');
    const other = await idleInTransaction('0a0a0a0a');
    const free = connect(db.url, { max: 1, applicationName: 'coverage-rollup', instanceId: 'f0f0f0f0' });
    pools.push(free);
    const [{ pid: idle } = { pid: 0 }] = await free<{ pid: number }[]>`select pg_backend_pid() as pid`;
    // Not yet stuck for 60 s: nothing ended.
    expect(await endFormerHolderSessions(postgresLeaseStore(db.sql), 'f0f0f0f0', 60_000, 5000)).toEqual({
      ended: [],
      refused: [],
      hidden: 0,
    });
    await waitFor(
      async () => {
        const [row] = await db.sql`
          select clock_timestamp() - state_change > interval '200 ms' as old
          from pg_stat_activity where pid = ${stuck}`;
        return row?.old === true;
      },
      { what: 'the stuck session idle for 200 ms' },
    );
    const result = await endFormerHolderSessions(postgresLeaseStore(db.sql), 'f0f0f0f0', 200, 5000);
    expect(result.refused).toEqual([]);
    expect(result.ended).toEqual([
      expect.objectContaining({
        pid: stuck,
        application_name: 'coverage-rollup@f0f0f0f0',
        state: 'idle in transaction',
        wait_event_type: 'Client',
      }),
    ]);
    await waitFor(async () => !(await alive(stuck)), { what: 'the stuck session gone' });
    expect(await alive(other)).toBe(true); // another instance's
    expect(await alive(idle)).toBe(true); // the former instance's, but in no transaction
  });

  it('reports a refusal (a superuser session, a role without the privilege) and ends the rest', async () => {
    const role = uniqueName('cr_nosignal').toLowerCase();
    // It may see every session (else their states are hidden: counted, not ended), not end them.
    await db.sql`create role ${db.sql(role)} login in role pg_read_all_stats`;
    const restrictedUrl = new URL(db.url);
    restrictedUrl.username = role;
    const restricted = connect(restrictedUrl.toString(), { max: 1, applicationName: 'lease-test' });
    try {
      const superuser = await idleInTransaction('e1e1e1e1'); // the test's role: a superuser
      const own = await idleInTransaction('e1e1e1e1', restrictedUrl.toString()); // the role's own
      await new Promise((resolve) => setTimeout(resolve, 10));
      const result = await endFormerHolderSessions(postgresLeaseStore(restricted), 'e1e1e1e1', 0, 5000);
      expect(result.refused.map((s) => s.pid)).toEqual([superuser]);
      expect(result.ended.map((s) => s.pid)).toEqual([own]);
      expect(result.hidden).toBe(0);
      expect(await alive(superuser)).toBe(true);
      await db.sql`revoke pg_read_all_stats from ${db.sql(role)}`;
      const blind = connect(restrictedUrl.toString(), { max: 1, applicationName: 'lease-test' });
      pools.push(blind);
      expect(await endFormerHolderSessions(postgresLeaseStore(blind), 'e1e1e1e1', 0, 5000)).toEqual({
        ended: [],
        refused: [],
        hidden: 1,
      });
      await db.sql`select pg_terminate_backend(${superuser}::int)`;
    } finally {
      await restricted.end({ timeout: 1 });
      for (const pool of pools.splice(0)) await pool.end({ timeout: 1 });
      await db.sql`drop role ${db.sql(role)}`;
    }
  });
});
