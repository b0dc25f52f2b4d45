/**
 * The repair scan of a settled rollup (scheduler/repair-scan.ts): once every period was planned,
 * a due look (every 10 minutes in case a notification was lost, and each time a period passes
 * `after`) reads the coverage again only if the upstreams have new events, and then only the
 * periods that passed `after` since. Planning again what open requests already hold made every
 * such look cost a fenced transaction per rollup (bench:repairs, 10,000 open requests). "Now" is a
 * parameter of the scan: no waiting.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { defineRollups } from '../../src/config/rollups.js';
import { normalizeEvent } from '../../src/core/events/events.js';
import type { Fence } from '../../src/lease/fence.js';
import { RepairScan } from '../../src/scheduler/repair-scan.js';
import { commitEvents } from '../../src/store/assets/commit.js';
import { syncRollup } from '../../src/store/rollups.js';
import { createTestDatabase } from '../helpers/db.js';
import { log } from './ingest-harness.js';

const db = await createTestDatabase();
const HOUR = 3_600_000;
const MINUTE = 60_000;
const T0 = Date.UTC(2026, 0, 1);
const [runtime] = defineRollups(
  parseConfig({
    rollups: [
      {
        id: 'settled',
        upstream: ['st.a'],
        every: 'hour',
        begin: '2026-01-01',
        target: { type: 'queue', queue: 'st-runs' },
        repair: { after: 'PT1S', every: 'PT6H', target: { type: 'queue', queue: 'st-repairs' } },
      },
    ],
  }),
);
const { rollup, config } = runtime!;
await syncRollup(db.sql, rollup, config, log);
const fence: Fence = { current: () => null, verify: async () => {} };

const iso = (ms: number) => new Date(ms).toISOString();
let n = 0;
const cover = (from: number, to: number) =>
  commitEvents(db.sql, [
    normalizeEvent(
      { asset: 'st.a', start: iso(T0 + from * HOUR), end: iso(T0 + to * HOUR), id: `st-${n++}` },
      { maxPayloadBytes: 65_536 },
    ),
  ]);
const requests = async () =>
  (await db.sql<{ n: number }[]>`select count(*)::int as n from repair_requests`)[0]!.n;

describe('the repair scan of a settled rollup', () => {
  it('reads nothing again until its upstreams have new events or a period passes `after`', async () => {
    // Covered for 30 hours but hour 10.
    await cover(0, 10);
    await cover(11, 30);
    const scan = new RepairScan({
      sql: db.sql,
      fence,
      log,
      byId: new Map([[rollup.id, runtime!]]),
      scanMs: 15_000,
      budget: 100,
    });
    scan.reset();
    const now = T0 + 30 * HOUR + 30 * MINUTE;
    expect(await scan.scan(1, new Date(now))).toEqual({ made: 1, busy: false, scanned: 1 });
    expect(scan.wakeAt()).toBe(now + 10 * MINUTE); // the next look, in case a notification was lost

    // Nothing new: the look reads last_seq alone, and plans nothing again.
    expect(await scan.scan(1, new Date(now + 10 * MINUTE))).toEqual({ made: 0, busy: false, scanned: 0 });
    expect(scan.wakeAt()).toBe(now + 20 * MINUTE);

    // Hour 30 passes `after`, uncovered: looked at alone, and requested.
    expect(await scan.scan(1, new Date(T0 + 31 * HOUR + 1000))).toEqual({ made: 1, busy: false, scanned: 1 });
    expect(await requests()).toBe(2);

    // A new event whose notification was lost: the next look sees last_seq moved and reads
    // everything again (the rest of hour 10 is held by its request: nothing new to ask).
    await cover(10, 10.5);
    const later = T0 + 31 * HOUR + 10 * MINUTE + 1000;
    expect(scan.wakeAt()).toBeLessThanOrEqual(later);
    expect(await scan.scan(1, new Date(later))).toEqual({ made: 0, busy: false, scanned: 1 });
    expect(await scan.scan(1, new Date(later + 10 * MINUTE))).toEqual({ made: 0, busy: false, scanned: 0 });

    // A notification (or one naming no assets): everything again, scanMs after the last scan.
    scan.note(['st.a']);
    expect(scan.wakeAt()).toBe(later + 15_000);
    expect(await scan.scan(1, new Date(later + 10 * MINUTE + 1000))).toEqual({
      made: 0,
      busy: false,
      scanned: 1,
    });
    expect(await requests()).toBe(2);
  });
});
