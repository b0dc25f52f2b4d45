/**
 * The scheduler follows an upstream's log by seq, a batch at a time, from its cursor. The log's seq
 * index keys buckets of 8 (seq >> 3, migration 0013), so batches that end inside a bucket must
 * still read every event once and in order: here batches of 5 over 23 new events.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { defineRollups } from '../../src/config/rollups.js';
import { normalizeEvent } from '../../src/core/events/events.js';
import { markTouchedPeriods } from '../../src/scheduler/touch.js';
import { commitEvents } from '../../src/store/assets/commit.js';
import { syncRollup } from '../../src/store/rollups.js';
import { createTestDatabase } from '../helpers/db.js';
import { log } from './ingest-harness.js';

const db = await createTestDatabase();
const { sql } = db;
const HOUR = 3_600_000;
const T0 = Date.UTC(2026, 0, 1);
const [runtime] = defineRollups(
  parseConfig({
    rollups: [
      {
        id: 'hourly',
        upstream: 'b.0',
        every: 'hour',
        begin: '2026-01-01',
        target: { type: 'queue', queue: 'q' },
      },
    ],
  }),
);
const { rollup, config } = runtime!;
await syncRollup(sql, rollup, { ...config, target: config.target }, log);

const iso = (ms: number) => new Date(ms).toISOString();
const hour = (h: number) =>
  normalizeEvent(
    { asset: 'b.0', start: iso(T0 + h * HOUR), end: iso(T0 + (h + 1) * HOUR), id: `b-${h}` },
    { maxPayloadBytes: 65_536 },
  );
const cursor = async () =>
  (await sql<{ seq: number }[]>`select seq from rollup_cursors where rollup_id = 'hourly'`)[0]?.seq;

describe('following the log in batches', () => {
  it('reads every event once, in seq order, when batches end inside a bucket of the seq index', async () => {
    await commitEvents(sql, [hour(0)]);
    // First pass: the cursor is seeded from the merged index, at seq 1.
    await markTouchedPeriods(sql, [rollup], 5, 30_000);
    expect(await cursor()).toBe(1);
    await commitEvents(
      sql,
      Array.from({ length: 23 }, (_, i) => hour(i + 1)),
    );
    const cursors: number[] = [];
    for (let pass = 0; pass < 10; pass++) {
      const more = await markTouchedPeriods(sql, [rollup], 5, 30_000);
      cursors.push((await cursor())!);
      if (more.more.length === 0) break;
    }
    expect(cursors).toEqual([6, 11, 16, 21, 24]);
    const dirty = await sql<{ key: string }[]>`
      select key from periods where rollup_id = 'hourly' and dirty order by lo`;
    expect(dirty.map((p) => p.key)).toEqual(
      Array.from({ length: 24 }, (_, h) => `2026-01-01T${String(h).padStart(2, '0')}`),
    );
  });
});
