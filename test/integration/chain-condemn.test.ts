import { describe, expect, it } from 'vitest';
import { startTestDaemon, testConfig, testProducer } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

// Condemnation: the moment a triggered period owes a rerun, its output
// gets a replay requirement at the next generation's version, in the same transaction, so the
// rollup reading that output waits for the rerun. Here the outputs' completions are sent by hand,
// as a run's success would record them.

const db = await createTestDatabase();
const prefix = createTestPrefix();
const rollup = (id: string, upstream: string, every: string, output: string) => ({
  id,
  upstream: [upstream],
  every,
  timezone: 'UTC',
  begin: '2026-11-02',
  rerun: 'on_replay',
  output,
  target: { type: 'queue', queue: 'chain-runs' },
});
const config = testConfig(db, prefix, {
  rollups: [rollup('hourly', 'raw', 'hour', 'agg.hourly'), rollup('daily', 'agg.hourly', 'day', 'agg.daily')],
});
const daemon = await startTestDaemon(config);
const producer = testProducer(config);

const HOUR = 3_600_000;
const DAY = '2026-11-02T00:00:00Z';
const ms = (iso: string) => Date.parse(iso);
const iso = (t: number) => new Date(t).toISOString();
let ids = 0;
const completion = (asset: string, start: number, end: number, version: string) => ({
  name: 'e',
  data: { asset, start: iso(start), end: iso(end), version, id: `ev-${++ids}` },
});
const hoursOf = (asset: string, from: string, n: number, version: string) =>
  Array.from({ length: n }, (_, i) =>
    completion(asset, ms(from) + i * HOUR, ms(from) + (i + 1) * HOUR, version),
  );

const period = async (rollupId: string, start: string) => {
  const [row] = await db.sql<{ state: string; generation: number }[]>`
    select state, generation from periods where rollup_id = ${rollupId} and lo = ${ms(start) * 1000}`;
  return row;
};
const triggers = async (rollupId: string, start: string) =>
  (
    await db.sql<{ generation: number; reason: string }[]>`
      select generation, reason from triggers where rollup_id = ${rollupId} and period_lo = ${ms(start) * 1000}
      order by generation`
  ).map((t) => [t.generation, t.reason]);
const untilTriggers = (rollupId: string, start: string, n: number) =>
  waitFor(async () => ((await triggers(rollupId, start)).length >= n ? true : undefined), {
    what: `${n} trigger(s) of ${rollupId} ${start}`,
  });
const untilState = (rollupId: string, start: string, state: string) =>
  waitFor(async () => (await period(rollupId, start))?.state === state, {
    what: `${rollupId} ${start} ${state}`,
  });
const replays = (asset: string) =>
  db.sql<{ version: string; event_id: string; lo: number; hi: number }[]>`
    select e.version, e.event_id, e.lo, e.hi from events e join assets a on a.id = e.asset_id
    where a.name = ${asset} and e.replay order by e.seq`;
const coverage = async (asset: string, start: string, end: string) => {
  const res = await fetch(`${daemon.url}/v1/assets/${asset}/coverage?start=${start}&end=${end}`);
  return (await res.json()) as {
    covered: boolean;
    replay_required: Array<{ version: string; required_version: string }>;
  };
};

describe('condemnation of an output when its period owes a rerun', () => {
  it('condemns hourly and then daily output at the next generation, before any rerun, and only once', async () => {
    const hour = '2026-11-02T10:00:00Z';
    await producer.addBulk(hoursOf('raw', hour, 1, 'v1'));
    await untilTriggers('hourly', hour, 1);
    // The hourly runs' outputs for the whole day, as their successes would record them.
    await producer.addBulk(hoursOf('agg.hourly', DAY, 24, 'hourly#1'));
    await untilTriggers('daily', DAY, 1);

    // Watch, in one snapshot each time, that the hourly period is never seen owing a rerun
    // while its output is not yet condemned.
    let watching = true;
    let seenPending = 0;
    const violations: string[] = [];
    const watcher = (async () => {
      while (watching) {
        const [row] = await db.sql<{ state: string; condemned: boolean }[]>`
          select p.state, exists (
            select 1 from events e join assets a on a.id = e.asset_id
            where a.name = 'agg.hourly' and e.replay and e.version = 'hourly#2'
          ) as condemned
          from periods p where p.rollup_id = 'hourly' and p.lo = ${ms(hour) * 1000}`;
        if (row?.state === 'rerun_pending') {
          seenPending++;
          if (!row.condemned) violations.push('rerun_pending without condemnation');
        }
      }
    })();

    await producer.add('replay', {
      type: 'replay_requirement',
      asset: 'raw',
      start: hour,
      end: '2026-11-02T11:00:00Z',
      version: 'v2',
    });
    await untilState('hourly', hour, 'rerun_pending');
    await untilState('daily', DAY, 'rerun_pending');
    await waitFor(() => seenPending > 0, { what: 'the watcher to see rerun_pending' });
    watching = false;
    await watcher;
    expect(violations).toEqual([]);

    expect(await replays('agg.hourly')).toEqual([
      {
        version: 'hourly#2',
        event_id: 'condemn~hourly@20261102T100000Z#2',
        lo: ms(hour) * 1000,
        hi: (ms(hour) + HOUR) * 1000,
      },
    ]);
    expect(await replays('agg.daily')).toEqual([
      {
        version: 'daily#2',
        event_id: 'condemn~daily@20261102T000000Z#2',
        lo: ms(DAY) * 1000,
        hi: (ms(DAY) + 24 * HOUR) * 1000,
      },
    ]);
    const condemned = await coverage('agg.hourly', DAY, '2026-11-03T00:00:00Z');
    expect(condemned.covered).toBe(false);
    expect(condemned.replay_required).toMatchObject([{ version: 'hourly#1', required_version: 'hourly#2' }]);

    // A second replay of the same hour while the rerun is owed: the output is already condemned.
    await producer.add('replay', {
      type: 'replay_requirement',
      asset: 'raw',
      start: hour,
      end: '2026-11-02T11:00:00Z',
      version: 'v3',
    });
    // The raw hour rebuilt: the hourly rerun is triggered, the daily one is not (its input is condemned).
    await producer.addBulk(hoursOf('raw', hour, 1, 'v3'));
    await untilTriggers('hourly', hour, 2);
    // Barrier: a later hour triggers in a pass that marked everything sent before it.
    await producer.addBulk(hoursOf('raw', '2026-11-02T12:00:00Z', 1, 'v1'));
    await untilTriggers('hourly', '2026-11-02T12:00:00Z', 1);
    expect(await replays('agg.hourly')).toHaveLength(1);
    expect(await triggers('daily', DAY)).toEqual([[1, 'covered']]);
    expect(await period('daily', DAY)).toEqual({ state: 'rerun_pending', generation: 1 });

    // The hourly rerun's output arrives: now, and only now, the daily rerun runs.
    await producer.addBulk(hoursOf('agg.hourly', hour, 1, 'hourly#2'));
    await untilTriggers('daily', DAY, 2);
    expect(await triggers('daily', DAY)).toEqual([
      [1, 'covered'],
      [2, 'replay'],
    ]);

    // The next replay of the rebuilt hour condemns the output at the generation after the rerun.
    await producer.add('replay', {
      type: 'replay_requirement',
      asset: 'raw',
      start: hour,
      end: '2026-11-02T11:00:00Z',
      version: 'v4',
    });
    await waitFor(async () => (await replays('agg.hourly')).length === 2, { what: 'a second condemnation' });
    expect((await replays('agg.hourly'))[1]).toMatchObject({
      version: 'hourly#3',
      event_id: 'condemn~hourly@20261102T100000Z#3',
    });
  });

  it('condemns nothing for a period that was never triggered', async () => {
    const hour = '2026-11-05T10:00:00Z';
    await producer.addBulk([completion('raw', ms(hour), ms(hour) + HOUR / 2, 'v1')]);
    await producer.add('replay', {
      type: 'replay_requirement',
      asset: 'raw',
      start: hour,
      end: '2026-11-05T11:00:00Z',
      version: 'v2',
    });
    await producer.addBulk(hoursOf('raw', '2026-11-05T12:00:00Z', 1, 'v1'));
    await untilTriggers('hourly', '2026-11-05T12:00:00Z', 1);
    expect((await replays('agg.hourly')).filter((r) => r.lo === ms(hour) * 1000)).toEqual([]);
    expect(await period('hourly', hour)).toMatchObject({ state: 'waiting', generation: 0 });
  });
});
