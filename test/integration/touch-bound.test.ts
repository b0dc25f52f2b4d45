/**
 * The bound on the periods one event may touch, on a running daemon: a wide event is refused at
 * ingest naming the rollup, and a rollup added over an asset whose index already holds a huge
 * segment (accepted before any rollup read it) does not hold the scheduler: another rollup's fresh
 * period is still decided while the new rollup's seed goes on a budget a pass.
 */
import { describe, expect, it } from 'vitest';
import { MARK_BUDGET } from '../../src/scheduler/touch.js';
import { startTestDaemon, TEST_TOKEN, testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { nextEvent } from '../helpers/scheduler-events.js';
import { waitFor } from '../helpers/wait.js';

const db = await createTestDatabase();
const prefix = createTestPrefix();
const buckets = (id: string, upstream: string, every = 1000) => ({
  id,
  upstream: [upstream],
  every,
  begin: 0,
  target: { type: 'queue', queue: 'bound-runs' },
});
const config = testConfig(db, prefix, {
  rollups: [
    buckets('guarded', 'guarded.offsets'),
    {
      id: 'fresh',
      upstream: ['fresh.orders'],
      every: 'hour',
      begin: '2026-01-01',
      target: buckets('', '').target,
    },
  ],
});
const daemon = await startTestDaemon(config);

async function call(method: string, path: string, body: unknown) {
  const response = await fetch(`${daemon.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  // biome-ignore lint/suspicious/noExplicitAny: the answers' shapes are what the assertions check
  return { status: response.status, body: (await response.json()) as Record<string, any> };
}

const lastSeq = async (asset: string) =>
  (await db.sql<{ last_seq: number }[]>`select last_seq from assets where name = ${asset}`)[0]?.last_seq ?? 0;

describe('an event over too many periods of a rollup', () => {
  it('is refused by POST /v1/events with 400 naming the rollup, the periods and the bound; none of the batch goes on', async () => {
    const answer = await call('POST', '/v1/events', [
      { asset: 'guarded.offsets', start: 0, end: 1000 },
      { asset: 'guarded.offsets', start: 311, end: 8_700_000_000_000 },
    ]);
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ code: 'invalid_events' });
    expect(answer.body.errors).toEqual([
      {
        index: 1,
        reason: 'too_many_periods',
        message:
          'the event [311, 8700000000000) touches 8700000000 periods of rollup guarded (every 1000); an event may touch at most 1000000 periods of each rollup reading its asset: split it into smaller events',
      },
    ]);
    // Split, it passes.
    const split = await call('POST', '/v1/events', { asset: 'guarded.offsets', start: 0, end: 5000 });
    expect([200, 202]).toContain(split.status);
    await waitFor(async () => (await lastSeq('guarded.offsets')) === 1 || undefined, {
      what: 'the split event indexed, alone',
    });
  });

  it('accepted before a rollup read its asset, does not hold the scheduler once one does', async () => {
    const scheduler = daemon.scheduler!;
    // No rollup reads late.offsets yet: the event passes.
    const wide = await call('POST', '/v1/events', {
      asset: 'late.offsets',
      start: 311,
      end: 8_700_000_000_000,
    });
    expect([200, 202]).toContain(wide.status);
    await waitFor(async () => (await lastSeq('late.offsets')) === 1 || undefined, {
      what: 'the wide event indexed',
    });

    // A rollup of width 1 over it: 8.7e12 periods to seed.
    const put = await call('PUT', '/v1/rollups/late', buckets('late', 'late.offsets', 1));
    expect(put.status).toBeLessThan(300);
    // Recorded by the scheduler: the pass that records it goes on to mark it.
    await waitFor(
      async () => (await db.sql`select 1 from rollups where id = 'late'`).length > 0 || undefined,
      { what: 'the late rollup recorded' },
    );

    // Meanwhile another rollup's fresh period is decided.
    const hour = Date.UTC(2026, 5, 1, 10) * 1000;
    const decided = nextEvent(scheduler, 'decided', (e) => e.rollup === 'fresh' && e.lo === hour, {
      what: "fresh's period decided",
    });
    expect(
      (
        await call('POST', '/v1/events', {
          asset: 'fresh.orders',
          start: '2026-06-01T10:00:00Z',
          end: '2026-06-01T11:00:00Z',
        })
      ).status,
    ).toBeLessThan(300);
    expect(await decided).toMatchObject({ rollup: 'fresh', lo: hour, state: 'triggered' });

    // The seed goes on, newest periods first, a budget a pass; nothing of it skipped so far.
    const [cursor] = await db.sql<[{ seed_below: number | null }]>`
      select seed_below from rollup_cursors where rollup_id = 'late' and asset_name = 'late.offsets'`;
    expect(cursor.seed_below).toBeGreaterThan(311);
    const [late] = await db.sql<[{ n: number; lo: number; hi: number }]>`
      select count(*)::int as n, min(lo) as lo, max(hi) as hi from periods where rollup_id = 'late'`;
    expect(late.n).toBeGreaterThanOrEqual(MARK_BUDGET);
    expect(late.hi).toBe(8_700_000_000_000);
    expect(late.hi - late.lo).toBe(late.n);
  });
});
