import { describe, expect, it } from 'vitest';
import { startTestDaemon, testConfig, testProducer } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { nextEvent } from '../helpers/scheduler-events.js';
import { waitFor } from '../helpers/wait.js';

const db = await createTestDatabase();
const prefix = createTestPrefix();
const SETTLE_MS = 1000;
const rollup = (id: string, upstream: string, rerun: string, every = 'hour', settle = 'PT0S') => ({
  id,
  upstream: [upstream],
  every,
  timezone: 'UTC',
  begin: '2026-11-02',
  policy: { settle },
  rerun,
  target: { type: 'queue', queue: 'rerun-runs' },
});
const config = testConfig(db, prefix, {
  rollups: [
    rollup('upd', 'r.upd', 'on_update'),
    rollup('nev', 'r.nev', 'never'),
    rollup('rep', 'r.rep', 'on_replay'),
    rollup('upd_day', 'r.day', 'on_update', 'day', `PT${SETTLE_MS / 1000}S`),
    { ...rollup('rep_tol', 'r.tol', 'on_replay'), policy: { ratio: 0.9 } },
  ],
});
const { scheduler } = await startTestDaemon(config);
const producer = testProducer(config);

const MIN = 60_000;
const ms = (iso: string) => Date.parse(iso);
const iso = (t: number) => new Date(t).toISOString();
let ids = 0;

/** n contiguous slices of `sliceMs` from `start`, at `version`. */
const slices = (asset: string, start: string, n: number, sliceMs: number, version: string) =>
  Array.from({ length: n }, (_, i) => ({
    name: 'e',
    data: {
      asset,
      start: iso(ms(start) + i * sliceMs),
      end: iso(ms(start) + (i + 1) * sliceMs),
      version,
      id: `ev-${++ids}`,
    },
  }));

interface TriggerRow {
  generation: number;
  reason: string;
  decided_at: Date;
  idempotency_key: string;
  payload: { reason: string; generation: number; upstreams: Record<string, { versions: string[] }> };
}
const triggers = (rollupId: string, start: string) =>
  db.sql<TriggerRow[]>`
    select generation, reason, decided_at, idempotency_key, payload from triggers
    where rollup_id = ${rollupId} and period_lo = ${ms(start) * 1000} order by generation`;
const untilTriggers = (rollupId: string, start: string, n: number) =>
  waitFor(
    async () => {
      const rows = await triggers(rollupId, start);
      return rows.length >= n ? rows : undefined;
    },
    { what: `${n} trigger(s) of ${rollupId} ${start}` },
  );

/** Waits until every event sent so far for `asset` is in the log (so later events are newer). */
const ingested = (asset: string, count: number) =>
  waitFor(
    async () => {
      const [row] = await db.sql<{ n: number }[]>`
        select count(*)::int as n from events e join assets a on a.id = e.asset_id where a.name = ${asset}`;
      return row!.n >= count;
    },
    { what: `${count} events of ${asset} ingested` },
  );

/**
 * Every event of `asset` sent so far is marked and evaluated: the rollup's cursor has read them
 * all, and then a scheduler pass ended with nothing left to do (the pass that moved the cursor, or
 * a later one: either evaluated what the marking made dirty). Any rerun they owed is decided.
 */
const settled = async (rollupId: string, asset: string, eventsSoFar: number) => {
  await ingested(asset, eventsSoFar);
  await waitFor(
    async () => {
      const [row] = await db.sql<{ behind: boolean }[]>`
        select c.seq < a.last_seq as behind from rollup_cursors c join assets a on a.name = c.asset_name
        where c.rollup_id = ${rollupId} and c.asset_name = ${asset}`;
      return row?.behind === false;
    },
    { what: `${rollupId} to read every event of ${asset}` },
  );
  const idle = nextEvent(scheduler!, 'pass', (p) => !p.busy, { what: 'a pass with nothing left to do' });
  scheduler!.kick();
  await idle;
};

/** Twelve v1 slices make the hour trigger; then a replay requirement at v2 covers [hour, until). */
const triggeredThenCondemned = async (rollupId: string, asset: string, hour: string, until: string) => {
  await producer.addBulk(slices(asset, hour, 12, 5 * MIN, 'v1'));
  await untilTriggers(rollupId, hour, 1);
  await ingested(asset, 12);
  await producer.add('replay', { type: 'replay_requirement', asset, start: hour, end: until, version: 'v2' });
};

describe('reruns of a reprocessed hour', () => {
  it('on_update: twelve 5-minute v1 slices, then one 1-hour v2 event, give exactly one rerun (generation 2, reason update)', async () => {
    await producer.addBulk(slices('r.upd', '2026-11-02T10:00:00Z', 12, 5 * MIN, 'v1'));
    const [first] = await untilTriggers('upd', '2026-11-02T10:00:00Z', 1);
    expect(first).toMatchObject({
      generation: 1,
      reason: 'covered',
      idempotency_key: 'upd@20261102T100000Z#1',
    });

    await ingested('r.upd', 12);
    await producer.addBulk(slices('r.upd', '2026-11-02T10:00:00Z', 1, 60 * MIN, 'v2'));
    const [, rerun] = await untilTriggers('upd', '2026-11-02T10:00:00Z', 2);
    expect(rerun).toMatchObject({
      generation: 2,
      reason: 'update',
      idempotency_key: 'upd@20261102T100000Z#2',
      payload: { generation: 2, reason: 'update', upstreams: { 'r.upd': { versions: ['v2'] } } },
    });

    await settled('upd', 'r.upd', 13);
    expect((await triggers('upd', '2026-11-02T10:00:00Z')).map((t) => [t.generation, t.reason])).toEqual([
      [1, 'covered'],
      [2, 'update'],
    ]);
    const [period] = await db.sql`
      select state, generation, reason, rerun from periods where rollup_id = 'upd' and lo = ${ms('2026-11-02T10:00:00Z') * 1000}`;
    expect(period).toEqual({ state: 'triggered', generation: 2, reason: 'update', rerun: null });
  });

  it('never: the same reprocessing gives no rerun', async () => {
    await producer.addBulk(slices('r.nev', '2026-11-02T10:00:00Z', 12, 5 * MIN, 'v1'));
    await untilTriggers('nev', '2026-11-02T10:00:00Z', 1);
    await ingested('r.nev', 12);
    await producer.addBulk(slices('r.nev', '2026-11-02T10:00:00Z', 1, 60 * MIN, 'v2'));
    await settled('nev', 'r.nev', 13);
    expect((await triggers('nev', '2026-11-02T10:00:00Z')).map((t) => [t.generation, t.reason])).toEqual([
      [1, 'covered'],
    ]);
    const [period] = await db.sql`
      select state, generation, rerun from periods where rollup_id = 'nev' and lo = ${ms('2026-11-02T10:00:00Z') * 1000}`;
    expect(period).toEqual({ state: 'triggered', generation: 1, rerun: null });
  });

  it('on_replay: a replay requirement makes the period rerun_pending; a completion at the required version reruns it (generation 2, reason replay)', async () => {
    const hour = '2026-11-02T10:00:00Z';
    const lo = ms(hour) * 1000;
    await triggeredThenCondemned('rep', 'r.rep', hour, '2026-11-02T11:00:00Z');
    const pending = await waitFor(
      async () => {
        const [row] = await db.sql<{ state: string; rerun: string; ratio: number; generation: number }[]>`
          select state, rerun, ratio, generation from periods where rollup_id = 'rep' and lo = ${lo}`;
        // Evaluated after the requirement: nothing of the hour is complete at the required version.
        return row?.state === 'rerun_pending' && row.ratio === 0 ? row : undefined;
      },
      { what: 'rerun_pending' },
    );
    expect(pending).toMatchObject({ rerun: 'replay', generation: 1 });
    expect(await triggers('rep', hour)).toHaveLength(1);

    await producer.addBulk(slices('r.rep', hour, 1, 60 * MIN, 'v2'));
    const [, rerun] = await untilTriggers('rep', hour, 2);
    expect(rerun).toMatchObject({
      generation: 2,
      reason: 'replay',
      idempotency_key: 'rep@20261102T100000Z#2',
      payload: { reason: 'replay', upstreams: { 'r.rep': { versions: ['v2'] } } },
    });

    // Under on_replay a newer completion without a requirement is no reason to rerun.
    await ingested('r.rep', 14);
    await producer.addBulk(slices('r.rep', hour, 1, 60 * MIN, 'v3'));
    await settled('rep', 'r.rep', 15);
    expect((await triggers('rep', hour)).map((t) => [t.generation, t.reason])).toEqual([
      [1, 'covered'],
      [2, 'replay'],
    ]);
  });

  it('on_replay with ratio 0.9: a requirement that leaves the hour satisfied still waits for the rebuilt slice', async () => {
    const hour = '2026-11-02T10:00:00Z';
    const lo = ms(hour) * 1000;
    await triggeredThenCondemned('rep_tol', 'r.tol', hour, '2026-11-02T10:05:00Z');
    // 11/12 complete satisfies the ratio, yet the condemned slice is owed: no rerun yet.
    await waitFor(
      async () => {
        const [row] = await db.sql<{ state: string; ratio: number }[]>`
          select state, ratio from periods where rollup_id = 'rep_tol' and lo = ${lo}`;
        return row?.state === 'rerun_pending' && row.ratio < 1;
      },
      { what: 'rerun_pending at ratio 11/12' },
    );
    await settled('rep_tol', 'r.tol', 13);
    expect(await triggers('rep_tol', hour)).toHaveLength(1);

    await producer.addBulk(slices('r.tol', hour, 1, 5 * MIN, 'v2'));
    const [, rerun] = await untilTriggers('rep_tol', hour, 2);
    expect(rerun).toMatchObject({ generation: 2, reason: 'replay' });
    expect(rerun!.payload.upstreams['r.tol']!.versions.sort()).toEqual(['v1', 'v2']);
  });

  it('on_update with settle: a reprocessed day (24 hourly v2 events) gives one rerun, not 24', async () => {
    const day = '2026-11-03T00:00:00Z';
    await producer.addBulk(slices('r.day', day, 24, 60 * MIN, 'v1'));
    await untilTriggers('upd_day', day, 1);
    await ingested('r.day', 24);

    await producer.addBulk(slices('r.day', day, 24, 60 * MIN, 'v2'));
    const [, rerun] = await untilTriggers('upd_day', day, 2);
    expect(rerun).toMatchObject({ generation: 2, reason: 'update' });
    const [newest] = await db.sql<{ at: Date }[]>`
      select max(e.ingested_at) as at from events e join assets a on a.id = e.asset_id
      where a.name = 'r.day' and e.version = 'v2'`;
    expect(rerun!.decided_at.getTime()).toBeGreaterThanOrEqual(newest!.at.getTime() + SETTLE_MS);
    expect(rerun!.payload.upstreams['r.day']!.versions).toEqual(['v2']);

    await settled('upd_day', 'r.day', 48);
    expect((await triggers('upd_day', day)).map((t) => [t.generation, t.reason])).toEqual([
      [1, 'covered'],
      [2, 'update'],
    ]);
    // Nothing more owed: a third rerun still settling would show here as rerun_pending.
    const [period] = await db.sql`
      select state, generation, rerun from periods where rollup_id = 'upd_day' and lo = ${ms(day) * 1000}`;
    expect(period).toEqual({ state: 'triggered', generation: 2, rerun: null });
  });
});
