/**
 * Marking walks at most MARK_BUDGET periods of a rollup per transaction, newest first, and the
 * cursor records where it stopped inside a wide segment (a seed) or a wide event: later passes go
 * on from there, and every period is marked once in the end, none skipped.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { defineRollups } from '../../src/config/rollups.js';
import { normalizeEvent } from '../../src/core/events/events.js';
import { MARK_BUDGET, markTouchedPeriods } from '../../src/scheduler/touch.js';
import { commitEvents } from '../../src/store/assets/commit.js';
import { syncRollup } from '../../src/store/rollups.js';
import { createTestDatabase } from '../helpers/db.js';
import { log } from './ingest-harness.js';

const db = await createTestDatabase();
const { sql } = db;
const runtimes = defineRollups(
  parseConfig({
    rollups: ['wide', 'huge'].map((asset) => ({
      id: asset,
      upstream: asset,
      every: 1000,
      begin: 0,
      target: { type: 'queue', queue: 'q' },
    })),
  }),
);
for (const { rollup, config } of runtimes) await syncRollup(sql, rollup, config, log);
const [wide, huge] = runtimes.map((r) => r.rollup);

// Committed as the index would hold them from before a rollup read them: no bound applies here.
const event = (asset: string, start: number, end: number) =>
  normalizeEvent({ asset, start, end }, { maxPayloadBytes: 65_536 });

const cursor = async (rollup: string) =>
  (
    await sql<{ seq: number; event_below: number | null; seed_below: number | null }[]>`
      select seq, event_below, seed_below from rollup_cursors where rollup_id = ${rollup}`
  )[0];
const los = async (rollup: string) =>
  (await sql<{ lo: number }[]>`select lo from periods where rollup_id = ${rollup} order by lo`).map(
    (r) => r.lo,
  );
const buckets = (from: number, to: number) =>
  Array.from({ length: (to - from) / 1000 }, (_, i) => from + i * 1000);

describe('marking a bounded number of periods per pass', () => {
  it('seeds from a wide segment newest first, a budget a pass, and resumes where it stopped', async () => {
    await commitEvents(sql, [event('wide', 311, 25_000_311)]);
    // 25,001 buckets: [0, 1000) to [25,000,000, 25,001,000).
    expect(await markTouchedPeriods(sql, [wide!], 5000, 30_000)).toEqual({ more: [], later: ['wide'] });
    expect(await los('wide')).toEqual(buckets(25_001_000 - MARK_BUDGET * 1000, 25_001_000));
    expect(await cursor('wide')).toEqual({ seq: 1, event_below: null, seed_below: 15_001_000 });
    expect(await markTouchedPeriods(sql, [wide!], 5000, 30_000)).toEqual({ more: [], later: ['wide'] });
    expect(await markTouchedPeriods(sql, [wide!], 5000, 30_000)).toEqual({ more: [], later: [] });
    expect(await los('wide')).toEqual(buckets(0, 25_001_000));
    expect(await cursor('wide')).toEqual({ seq: 1, event_below: null, seed_below: null });
  });

  it('marks a wide event over several passes, holding the cursor before it until all of it is in', async () => {
    await commitEvents(sql, [event('wide', 25_000_311, 40_000_000), event('wide', 50_000_000, 50_000_500)]);
    // The first event's 15,000 buckets, newest first: the cursor stays before it, noting where.
    expect(await markTouchedPeriods(sql, [wide!], 5000, 30_000)).toEqual({ more: [], later: ['wide'] });
    expect(await cursor('wide')).toEqual({ seq: 1, event_below: 30_000_000, seed_below: null });
    expect(await los('wide')).toEqual(buckets(0, 25_001_000).concat(buckets(30_000_000, 40_000_000)));
    expect(await markTouchedPeriods(sql, [wide!], 5000, 30_000)).toEqual({ more: [], later: [] });
    expect(await cursor('wide')).toEqual({ seq: 3, event_below: null, seed_below: null });
    expect(await los('wide')).toEqual(buckets(0, 40_000_000).concat([50_000_000]));
    // Every period the events touched is due for evaluation, once.
    const [dirty] = await sql<[{ n: number }]>`
      select count(*)::int as n from periods where rollup_id = 'wide' and dirty and lo >= 25000000`;
    expect(dirty.n).toBe(15_001);
  });

  it('takes one budget of an asset whose segment holds billions of periods, and returns', async () => {
    await commitEvents(sql, [event('huge', 311, 8_700_000_000_000)]);
    const started = performance.now();
    expect(await markTouchedPeriods(sql, [huge!], 5000, 30_000)).toEqual({ more: [], later: ['huge'] });
    const seconds = (performance.now() - started) / 1000;
    const marked = await los('huge');
    expect(marked.length).toBe(MARK_BUDGET);
    expect(marked.at(-1)).toBe(8_699_999_999_000);
    expect(await cursor('huge')).toEqual({ seq: 1, event_below: null, seed_below: marked[0] });
    // One budget, not 8.7 billion periods (minutes of walking before the bound).
    expect(seconds).toBeLessThan(20);
  });
});
