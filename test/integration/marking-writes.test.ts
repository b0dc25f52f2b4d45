/**
 * Marking writes only what changes (with autovacuum off, every row version written is a
 * dead row until the daemon's vacuum): a period touched by several upstreams in one pass is written
 * once, and cursors are written only when they move (opening them locks them, it does not rewrite
 * them). Counted by the server's own statistics for this connection (n_tup_upd).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { defineRollups } from '../../src/config/rollups.js';
import { normalizeEvent } from '../../src/core/events/events.js';
import { markTouchedPeriods } from '../../src/scheduler/touch.js';
import { commitEvents } from '../../src/store/assets/commit.js';
import { connect } from '../../src/store/pg/db.js';
import { syncRollup } from '../../src/store/rollups.js';
import { createTestDatabase } from '../helpers/db.js';
import { log } from './ingest-harness.js';

const db = await createTestDatabase();
const sql = connect(db.url, { max: 1, applicationName: 'marking-writes' });
afterAll(() => sql.end({ timeout: 5 }));

const UPSTREAM = ['w.0', 'w.1', 'w.2'];
const HOUR = 3_600_000;
const T0 = Date.UTC(2026, 0, 1);
const [runtime] = defineRollups(
  parseConfig({
    rollups: [
      {
        id: 'fan',
        upstream: UPSTREAM,
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
const commitHour = (hour: number) =>
  commitEvents(
    db.sql,
    UPSTREAM.map((asset) =>
      normalizeEvent(
        { asset, start: iso(T0 + hour * HOUR), end: iso(T0 + (hour + 1) * HOUR), id: `${asset}-${hour}` },
        { maxPayloadBytes: 65_536 },
      ),
    ),
  );

/** Rows updated per table by this connection so far: its pending statistics flushed first. */
async function updated(): Promise<Record<string, number>> {
  await sql`select pg_stat_force_next_flush()`;
  const rows = await sql<{ name: string; n: number }[]>`
    select relname::text as name, n_tup_upd::int8 as n from pg_stat_user_tables
    where relname in ('periods', 'rollup_cursors')`;
  return Object.fromEntries(rows.map((r) => [r.name, Number(r.n)]));
}

describe('marking', () => {
  it('writes a period touched by three upstreams once, and cursors only when they move', async () => {
    await commitHour(0);
    // First pass: the cursors are created and seeded from the merged index.
    await markTouchedPeriods(sql, [rollup], 1000, 30_000);
    await commitHour(1);
    const before = await updated();
    await markTouchedPeriods(sql, [rollup], 1000, 30_000);
    const after = await updated();
    expect({
      periods: after.periods! - before.periods!,
      rollup_cursors: after.rollup_cursors! - before.rollup_cursors!,
    }).toEqual({ periods: 1, rollup_cursors: UPSTREAM.length });
    const dirty = await db.sql<
      { key: string }[]
    >`select key from periods where rollup_id = 'fan' and dirty order by lo`;
    expect(dirty.map((p) => p.key)).toEqual(['2026-01-01T00', '2026-01-01T01']);

    // Nothing new in the log: a pass writes nothing.
    expect(await markTouchedPeriods(sql, [rollup], 1000, 30_000)).toEqual({ more: [], later: [] });
    expect(await updated()).toEqual(after);
  });
});
