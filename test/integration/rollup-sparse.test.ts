/**
 * Sparse periods: only periods something happened to are stored; every other period
 * since `begin` exists for the API with its derived state; deadline catch-up is bounded; fresh
 * periods are decided before a backlog; listings page with cursors.
 */
import { describe, expect, it } from 'vitest';
import { startTestDaemon, testConfig, testProducer, testQueue } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const HOUR = 3_600_000;
const db = await createTestDatabase();
const prefix = createTestPrefix();
const startedAt = Date.now();
const hourFloor = (ms: number) => Math.floor(ms / HOUR) * HOUR;
const iso = (ms: number) => new Date(ms).toISOString();
const threeDaysAgo = iso(hourFloor(startedAt) - 72 * HOUR);
const target = { type: 'queue', queue: 'sparse-runs' };
const config = testConfig(db, prefix, {
  rollups: [
    { id: 'long', upstream: ['s.long'], every: 'hour', begin: '2023-01-01', target },
    {
      id: 'misses',
      upstream: ['s.misses'],
      every: 'hour',
      begin: threeDaysAgo,
      policy: { deadline: 'PT1H', on_deadline: 'miss' },
      target,
    },
    {
      id: 'catchup',
      upstream: ['s.catchup'],
      every: 'hour',
      begin: threeDaysAgo,
      policy: { deadline: 'PT1H', on_deadline: 'trigger', catch_up: 'PT3H' },
      target,
    },
    { id: 'backlog', upstream: ['s.backlog'], every: 'hour', begin: '2023-01-01', target },
    { id: 'fresh', upstream: ['s.fresh'], every: 'hour', begin: '2023-01-01', target },
  ],
});
const daemon = await startTestDaemon(config);
const producer = testProducer(config);
const runs = testQueue('sparse-runs', prefix, config);

const get = async (url: string) => {
  const response = await daemon.http.inject({ url });
  expect(response.statusCode, response.body).toBe(200);
  return response.json();
};
const rows = async (rollup: string) =>
  (await db.sql<{ n: number }[]>`select count(*)::int as n from periods where rollup_id = ${rollup}`)[0]!.n;
type Counts = Record<'waiting' | 'settling' | 'triggered' | 'rerun_pending' | 'missed', number>;
const countsOf = async (id: string): Promise<Counts> =>
  (await get(`/v1/rollups?q=${id}`)).rollups.find((r: { id: string }) => r.id === id).periods;

describe('sparse periods', () => {
  it('stores nothing for periods nothing happened to, yet lists and counts every one since begin', async () => {
    // The catch-up rollup is the only one that owes decisions at start: wait for them first.
    await waitFor(
      async () =>
        (await db.sql`select 1 from triggers where rollup_id = 'catchup'`).length >= 3 &&
        (await db.sql`select 1 from periods where rollup_id = 'catchup' and dirty`).length === 0,
      { what: 'catch-up triggers decided' },
    );
    expect(await rows('long')).toBe(0);
    expect(await rows('misses')).toBe(0);
    const hoursSinceBegin = (begin: string) => Math.floor((Date.now() - Date.parse(begin)) / HOUR) + 1;
    const long = await countsOf('long');
    const total = Object.values(long).reduce((a, b) => a + b, 0);
    expect(Math.abs(total - hoursSinceBegin('2023-01-01T00:00:00Z'))).toBeLessThanOrEqual(1);
    expect(long.waiting).toBe(total);

    // A closed window far back: 24 derived hours, waiting, ratio 0, generation 0.
    const day = await get('/v1/rollups/long/periods?start=2023-03-01T00:00:00Z&end=2023-03-02T00:00:00Z');
    expect(day.periods).toHaveLength(24);
    expect(day.periods[0]).toEqual({
      start: '2023-03-01T00:00:00Z',
      end: '2023-03-01T01:00:00Z',
      key: '2023-03-01T00',
      state: 'waiting',
      ratio: 0,
      ratios: { 's.long': 0 },
      generation: 0,
      reason: null,
      triggered_at: null,
      run: null,
    });
    expect(day.counts).toMatchObject({ waiting: 24, missed: 0 });
    expect(day.next_cursor).toBeNull();

    // Past their deadline under on_deadline: miss, untouched hours are missed, and only derived.
    const misses = await countsOf('misses');
    const passed = Math.floor((Date.now() - HOUR - Date.parse(threeDaysAgo)) / HOUR);
    expect(Math.abs(misses.missed - passed)).toBeLessThanOrEqual(1);
    expect(misses.missed + misses.waiting).toBe(hoursSinceBegin(threeDaysAgo));
    expect(await rows('misses')).toBe(0);
  });

  it('triggers deadlines only within catch_up at first start; older hours are missed, not triggered', async () => {
    const triggers = await db.sql<{ lo: number; reason: string }[]>`
      select period_lo as lo, reason from triggers where rollup_id = 'catchup' order by period_lo`;
    expect(triggers.length).toBeGreaterThanOrEqual(3);
    expect(triggers.length).toBeLessThanOrEqual(4); // an hour may turn during the test
    for (const t of triggers) {
      expect(t.reason).toBe('deadline');
      const end = t.lo / 1000 + HOUR;
      // Deadline (end + 1 h) passed, within catch-up (3 h) of the daemon's start.
      expect(end + HOUR).toBeLessThanOrEqual(Date.now());
      expect(end + 4 * HOUR).toBeGreaterThan(startedAt);
    }
    const counts = await countsOf('catchup');
    expect(counts.triggered).toBe(triggers.length);
    expect(counts.missed).toBeGreaterThan(60); // three days of history, missed without rows
    expect(await rows('catchup')).toBe(triggers.length);
    expect((await runs.getJobs(['waiting'])).filter((j) => j.data.rollup === 'catchup')).toHaveLength(
      triggers.length,
    );
  });

  it('gives a period its row when data touches it, and decides a fresh period before a backlog', async () => {
    // 20,000 pending periods of history in one rollup, and then a fresh hour in another.
    const base = Date.parse('2023-01-01T00:00:00Z');
    await db.sql`
      insert into periods (rollup_id, lo, hi, key)
      select 'backlog', (${base}::int8 + i * ${HOUR}::int8) * 1000, (${base}::int8 + (i + 1) * ${HOUR}::int8) * 1000, 'h' || i
      from generate_series(0, 19999) as i`;
    const hour = hourFloor(Date.now()) - HOUR;
    await producer.add('e', { asset: 's.fresh', start: iso(hour), end: iso(hour + HOUR) });
    const decided = await waitFor(
      async () =>
        (
          await db.sql<{ decided_at: Date }[]>`
            select decided_at from triggers where rollup_id = 'fresh' and period_lo = ${hour * 1000}`
        )[0],
      { what: 'the fresh hour triggered' },
    );
    expect(await rows('fresh')).toBe(1);
    await waitFor(
      async () =>
        (await db.sql`select 1 from periods where rollup_id = 'backlog' and dirty limit 1`).length === 0,
      { what: 'the backlog evaluated', timeout: 120_000 },
    );
    const [last] = await db.sql<{ at: Date }[]>`
      select max(updated_at) as at from periods where rollup_id = 'backlog'`;
    expect(decided.decided_at.getTime()).toBeLessThan(last!.at.getTime());
  });

  it('pages a listing with cursors, each period once, in either order and with a state filter', async () => {
    const window = `start=${encodeURIComponent(threeDaysAgo)}&end=${encodeURIComponent(iso(Date.parse(threeDaysAgo) + 30 * HOUR))}`;
    const follow = async (query: string) => {
      const keys: string[] = [];
      let cursor: string | null = null;
      do {
        const page = await get(
          `/v1/rollups/misses/periods?${query}&limit=7${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        );
        expect(page.periods.length).toBeLessThanOrEqual(7);
        keys.push(...page.periods.map((p: { key: string }) => p.key));
        cursor = page.next_cursor;
      } while (cursor !== null);
      return keys;
    };
    const asc = await follow(window);
    expect(asc).toHaveLength(30);
    expect(new Set(asc).size).toBe(30);
    expect([...asc].sort()).toEqual(asc);
    const desc = await follow(`${window}&order=desc`);
    expect([...desc].sort()).toEqual(asc);
    expect(await follow(`${window}&state=missed`)).toEqual(asc);
    expect(await follow(`${window}&state=waiting`)).toEqual([]);

    const summary = await get(`/v1/rollups/misses/periods?${window}&summary=true&limit=1`);
    expect(summary.summary).toEqual([
      { start: threeDaysAgo.replace('.000Z', 'Z'), end: expect.any(String), state: 'missed', count: 30 },
    ]);
    expect(summary.counts.missed).toBe(30);
    const bad = await daemon.http.inject({ url: '/v1/rollups/misses/periods?cursor=bogus' });
    expect(bad.statusCode).toBe(400);
  });

  it('explains one period: upstream coverage, the verdict and its trigger history', async () => {
    const hour = hourFloor(Date.now()) - 2 * HOUR;
    const key = iso(hour).slice(0, 13);
    // Half the hour arrives: the period waits, and says what is missing.
    await producer.add('e', { asset: 's.long', start: iso(hour), end: iso(hour + HOUR / 2) });
    await waitFor(async () => (await rows('long')) === 1, { what: 'the touched hour stored' });
    const waiting = await get(`/v1/rollups/long/periods/${key}`);
    expect(waiting.period).toMatchObject({ key, state: 'waiting', stored: true, generation: 0, ratio: 0.5 });
    expect(waiting.upstreams['s.long']).toEqual({
      seen: true,
      ratio: 0.5,
      missing: [
        { start: iso(hour + HOUR / 2).replace('.000Z', 'Z'), end: iso(hour + HOUR).replace('.000Z', 'Z') },
      ],
      missing_count: 1,
      missing_total: 1800,
      replay_required: [],
      replay_required_count: 0,
      versions: [],
    });
    expect(waiting.verdict).toMatchObject({ satisfied: 'no', outcome: 'wait (waiting)', deadline_at: null });
    expect(waiting.triggers).toEqual([]);

    // The rest arrives: triggered, with its decision and delivery in the history.
    await producer.add('e', { asset: 's.long', start: iso(hour + HOUR / 2), end: iso(hour + HOUR) });
    const done = await waitFor(
      async () => {
        const answer = await get(`/v1/rollups/long/periods/${key}`);
        return answer.triggers[0]?.delivered_at ? answer : undefined;
      },
      { what: 'the hour triggered and delivered' },
    );
    expect(done.period).toMatchObject({ state: 'triggered', generation: 1, reason: 'covered', ratio: 1 });
    expect(done.triggers).toEqual([
      expect.objectContaining({
        generation: 1,
        reason: 'covered',
        idempotency_key: `long@${key.replace(/-/g, '')}0000Z#1`,
        attempts: 1,
      }),
    ]);
    expect(done.verdict).toMatchObject({ satisfied: 'full', outcome: 'wait (triggered)' });

    // A derived period far back, and one that missed its deadline.
    const old = await get('/v1/rollups/long/periods/2023-03-01T05');
    expect(old.period).toMatchObject({ state: 'waiting', stored: false, ratio: 0 });
    expect(old.upstreams['s.long'].missing).toEqual([
      { start: '2023-03-01T05:00:00Z', end: '2023-03-01T06:00:00Z' },
    ]);
    expect(old.upstreams['s.long'].missing_total).toBe(3600);
    const missedKey = threeDaysAgo.slice(0, 13);
    const missed = await get(`/v1/rollups/misses/periods/${missedKey}`);
    expect(missed.period).toMatchObject({ state: 'missed', stored: false });
    expect(missed.verdict).toMatchObject({ outcome: 'miss', deadline_at: expect.any(String) });
    for (const bad of ['2023-03-01', '2022-12-31T23', '2099-01-01T00', 'x']) {
      const response = await daemon.http.inject({ url: `/v1/rollups/long/periods/${bad}` });
      expect(response.statusCode, bad).toBe(404);
    }
  });
});
