/**
 * `coverage_rollup_periods_past_deadline`: periods whose deadline passed with nothing decided, per
 * rollup with a deadline, from 0. No scheduler runs here, so nothing acts on a deadline: the gauge
 * counts what a lease holder would have triggered or missed.
 */
import { describe, expect, it } from 'vitest';
import { startTestDaemon, testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';

const HOUR_MS = 3_600_000;
// Fixed at start: the hour turning during the run moves no expectation below (see each comment).
const H = Math.floor(Date.now() / HOUR_MS) * HOUR_MS;
const iso = (ms: number) => new Date(ms).toISOString();
const target = { type: 'queue', queue: 'late-runs' };
const hourly = (id: string, policy?: Record<string, string>) => ({
  id,
  upstream: [`${id}.feed`],
  every: 'hour',
  begin: iso(H - 6 * HOUR_MS),
  ...(policy ? { policy } : {}),
  target,
});

const db = await createTestDatabase();
const daemon = await startTestDaemon(
  testConfig(db, createTestPrefix(), {
    scheduler: { enabled: false },
    rollups: [
      hourly('late_trigger', { deadline: 'PT1H', on_deadline: 'trigger', catch_up: 'PT3H' }),
      hourly('late_miss', { deadline: 'PT1H', on_deadline: 'miss' }),
      hourly('no_deadline'),
    ],
  }),
);

const gauge = async () => {
  const body = (await daemon.http.inject({ url: '/metrics' })).body;
  const values = [...body.matchAll(/^coverage_rollup_periods_past_deadline\{rollup="(\w+)"\} (\d+)$/gm)];
  return Object.fromEntries(values.map(([, rollup, n]) => [rollup, Number(n)]));
};

/** A stored period of `rollup` starting `hoursAgo` hours before H. */
async function store(rollup: string, hoursAgo: number, state: string, due: Date | null, dirty: boolean) {
  // No scheduler registers the rollups here: their row, for the periods' foreign key.
  await db.sql`
    insert into rollups (id, definition, calendar_hash, definition_hash) values (${rollup}, '{}', '', '')
    on conflict (id) do nothing`;
  const lo = (H - hoursAgo * HOUR_MS) * 1000;
  const key = iso(H - hoursAgo * HOUR_MS).slice(0, 13);
  await db.sql`
    insert into periods (rollup_id, lo, hi, key, state, generation, due_at, dirty)
    values (${rollup}, ${lo}, ${lo + HOUR_MS * 1000}, ${key}, ${state}, ${state === 'triggered' ? 1 : 0}, ${due}, ${dirty})`;
}

describe('periods past their deadline', () => {
  it('starts at 0 for a rollup with a deadline, and counts deadline triggers owed but not made', async () => {
    // late_trigger: hours H-4..H-2 are past their deadline (end + 1h) and within catch_up (3h
    // more); older ones are missed. Three owed, whatever hour it is now.
    expect(await gauge()).toEqual({ late_trigger: 3, late_miss: 0 });
  });

  it('counts stored periods still waiting or settling past their deadline, not decided ones', async () => {
    await store('late_trigger', 3, 'triggered', null, false); // decided: one owed trigger fewer
    await store('late_miss', 4, 'waiting', new Date(H - 2 * HOUR_MS), false); // due at its deadline
    await store('late_miss', 3, 'settling', null, true); // marked, not evaluated since
    await store('late_miss', 0, 'waiting', new Date(H + 2 * HOUR_MS), false); // deadline ahead
    expect(await gauge()).toEqual({ late_trigger: 2, late_miss: 2 });
  });
});
