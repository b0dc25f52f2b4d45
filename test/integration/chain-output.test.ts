import { describe, expect, it } from 'vitest';
import { defineRollups } from '../../src/config/rollups.js';
import type { RunReport } from '../../src/core/runs.js';
import { reportRun } from '../../src/store/runs/report.js';
import { startTestDaemon, testConfig, testProducer } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

// Output recording: the success of a period's current run commits the
// output's completion in the transaction that records the success (reportRun); a failure, a
// superseded generation, or a success after the period owes a rerun records nothing.

const db = await createTestDatabase();
const prefix = createTestPrefix();
const config = testConfig(db, prefix, {
  rollups: [
    {
      id: 'hourly',
      upstream: ['raw'],
      every: 'hour',
      begin: '2026-11-02',
      rerun: 'on_replay',
      output: 'agg.hourly',
      target: { type: 'queue', queue: 'output-runs' },
    },
  ],
});
const daemon = await startTestDaemon(config);
const producer = testProducer(config);
const [{ rollup }] = defineRollups(config) as [ReturnType<typeof defineRollups>[number]];

const HOUR = 3_600_000;
const ms = (iso: string) => Date.parse(iso);
const lo = (hour: string) => ms(hour) * 1000;
let ids = 0;
const rawHour = (hour: string, version: string) => ({
  name: 'e',
  data: {
    asset: 'raw',
    start: hour,
    end: new Date(ms(hour) + HOUR).toISOString(),
    version,
    id: `ev-${++ids}`,
  },
});
const untilRun = (hour: string, generation: number) =>
  waitFor(
    async () => {
      const [row] = await db.sql<{ run_id: string }[]>`
        select run_id from runs where rollup_id = 'hourly' and period_lo = ${lo(hour)} and generation = ${generation}`;
      return row?.run_id;
    },
    { what: `run of hourly ${hour} generation ${generation}` },
  );
const report = (hour: string, generation: number, r: RunReport, attempt = 1) =>
  db.sql.begin((tx) =>
    reportRun(tx, { rollupId: 'hourly', lo: lo(hour), generation, attempt }, r, 'callback', rollup.run, {
      record: 'all',
      rollup,
    }),
  );
const outputs = (hour: string) =>
  db.sql<{ replay: boolean; version: string; event_id: string }[]>`
    select e.replay, e.version, e.event_id from events e join assets a on a.id = e.asset_id
    where a.name = 'agg.hourly' and e.lo = ${lo(hour)} order by e.seq`;
const coverage = async (hour: string) => {
  const end = new Date(ms(hour) + HOUR).toISOString();
  const res = await fetch(`${daemon.url}/v1/assets/agg.hourly/coverage?start=${hour}&end=${end}`);
  return (await res.json()) as {
    covered: boolean;
    ratio: number;
    batches: Array<{ state: string; version: string }>;
  };
};
const succeeded: RunReport = { kind: 'target', state: 'succeeded' };

describe('output assets', () => {
  it('are known at start, all gap, in their rollup domain', async () => {
    const [asset] = await db.sql`select domain from assets where name = 'agg.hourly'`;
    expect(asset).toEqual({ domain: 'time' });
    expect((await coverage('2026-11-02T10:00:00Z')).ratio).toBe(0);
  });

  it('a success covers the period at {rollup}#g, event id = the run id; twice is once', async () => {
    const hour = '2026-11-02T10:00:00Z';
    await producer.add('e', rawHour(hour, 'v1').data);
    const runId = await untilRun(hour, 1);
    expect((await report(hour, 1, succeeded))?.effect).toBe('applied');
    await report(hour, 1, succeeded);
    expect(await outputs(hour)).toEqual([{ replay: false, version: 'hourly#1', event_id: runId }]);
    expect(runId).toBe('hourly@20261102T100000Z#1');
    expect(await coverage(hour)).toMatchObject({ covered: true, ratio: 1 });
  });

  it('takes the version the run reported', async () => {
    const hour = '2026-11-02T11:00:00Z';
    await producer.add('e', rawHour(hour, 'v1').data);
    await untilRun(hour, 1);
    await report(hour, 1, { kind: 'target', state: 'succeeded', version: 'spark-7' });
    expect(await outputs(hour)).toMatchObject([{ version: 'spark-7' }]);
  });

  it('a failed run leaves its output period uncovered', async () => {
    const hour = '2026-11-02T12:00:00Z';
    await producer.add('e', rawHour(hour, 'v1').data);
    await untilRun(hour, 1);
    expect((await report(hour, 1, { kind: 'target', state: 'failed', error: 'boom' }))?.effect).toBe(
      'applied',
    );
    expect(await outputs(hour)).toEqual([]);
    expect((await coverage(hour)).ratio).toBe(0);
  });

  it('commits with the success or not at all', async () => {
    const hour = '2026-11-02T13:00:00Z';
    await producer.add('e', rawHour(hour, 'v1').data);
    await untilRun(hour, 1);
    await expect(
      db.sql.begin(async (tx) => {
        await reportRun(
          tx,
          { rollupId: 'hourly', lo: lo(hour), generation: 1, attempt: 1 },
          succeeded,
          'callback',
          rollup.run,
          { record: 'all', rollup },
        );
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect(await outputs(hour)).toEqual([]);
    const [run] = await db.sql`select state from runs where rollup_id = 'hourly' and period_lo = ${lo(hour)}`;
    expect(run!.state).not.toBe('succeeded');
  });

  it('a success after the period owes a rerun, and a superseded generation, change no output', async () => {
    const hour = '2026-11-02T14:00:00Z';
    await producer.add('e', rawHour(hour, 'v1').data);
    await untilRun(hour, 1);
    await producer.add('replay', {
      type: 'replay_requirement',
      asset: 'raw',
      start: hour,
      end: '2026-11-02T15:00:00Z',
      version: 'v2',
    });
    await waitFor(async () => (await outputs(hour)).length === 1, { what: 'the condemnation' });
    // Generation 1 read the data before the reprocessing: its success must not end the condemnation.
    expect((await report(hour, 1, succeeded))?.effect).toBe('applied');
    expect(await outputs(hour)).toEqual([
      { replay: true, version: 'hourly#2', event_id: 'condemn~hourly@20261102T140000Z#2' },
    ]);

    await producer.add('e', rawHour(hour, 'v2').data);
    const rerunId = await untilRun(hour, 2);
    expect((await report(hour, 1, succeeded))?.effect).not.toBe('applied');
    expect(await outputs(hour)).toHaveLength(1);
    expect((await report(hour, 2, succeeded))?.effect).toBe('applied');
    expect((await outputs(hour))[1]).toEqual({ replay: false, version: 'hourly#2', event_id: rerunId });
    expect(await coverage(hour)).toMatchObject({
      covered: true,
      batches: [{ state: 'complete', version: 'hourly#2' }],
    });
  });

  it('a target report without its rollup is refused loudly', async () => {
    await expect(
      db.sql.begin((tx) =>
        reportRun(
          tx,
          { rollupId: 'hourly', lo: lo('2026-11-02T10:00:00Z'), generation: 1, attempt: 1 },
          succeeded,
          'callback',
          rollup.run,
          { record: 'all' },
        ),
      ),
    ).rejects.toThrow('needs its rollup');
  });
});
