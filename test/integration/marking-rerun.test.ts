/**
 * A triggered period that new events owe a rerun is `rerun_pending` as soon as the mark commits,
 * in the transaction that condemns the rollup's output: between that commit and the next
 * evaluation, a success of the condemned generation must find the period no longer `triggered`
 * (it then records no output: src/store/assets/outputs.ts outputOf).
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
const sql = connect(db.url, { max: 2, applicationName: 'marking-rerun' });
afterAll(() => sql.end({ timeout: 5 }));

const HOUR = 3_600_000;
const T0 = Date.UTC(2026, 0, 1);
const [runtime] = defineRollups(
  parseConfig({
    rollups: [
      {
        id: 'rr',
        upstream: ['rr.in'],
        every: 'hour',
        begin: '2026-01-01',
        rerun: 'on_replay',
        output: 'rr.out',
        target: { type: 'queue', queue: 'q' },
      },
    ],
  }),
);
const { rollup, config } = runtime!;
await syncRollup(sql, rollup, { ...config, target: config.target }, log);

const iso = (ms: number) => new Date(ms).toISOString();
const span = { start: iso(T0), end: iso(T0 + HOUR) };
const commit = (raw: Record<string, unknown>) =>
  commitEvents(db.sql, [normalizeEvent({ asset: 'rr.in', ...span, ...raw }, { maxPayloadBytes: 65_536 })]);
const period = async () =>
  (
    await db.sql<{ state: string; generation: number; rerun: string | null }[]>`
      select state, generation, rerun from periods where rollup_id = 'rr' and lo = ${T0 * 1000}`
  )[0];

describe('a mark that owes a triggered period a rerun', () => {
  it('makes it rerun_pending in the transaction that condemns its output', async () => {
    await commit({ id: 'c1', version: 'v1' });
    await markTouchedPeriods(sql, [rollup], 1000, 30_000);
    // Triggered at generation 1, having seen the completion: what the evaluation's trigger writes.
    const [last] = await db.sql<
      { seq: number }[]
    >`select last_seq::int as seq from assets where name = 'rr.in'`;
    await db.sql`
      update periods set state = 'triggered', generation = 1, dirty = false,
        trigger_seqs = jsonb_build_object('rr.in', ${last!.seq}::int)
      where rollup_id = 'rr' and lo = ${T0 * 1000}`;

    await commit({ type: 'replay_requirement', version: 'v2' });
    await markTouchedPeriods(sql, [rollup], 1000, 30_000);

    expect(await period()).toEqual({ state: 'rerun_pending', generation: 1, rerun: 'replay' });
    const condemned = await db.sql`
      select e.replay, e.version from events e join assets a on a.id = e.asset_id where a.name = 'rr.out'`;
    expect(condemned).toEqual([{ replay: true, version: 'rr#2' }]);
  });
});
