import { describe, expect, it } from 'vitest';
import { defineRollups } from '../../src/config/rollups.js';
import { reportRun } from '../../src/store/runs/report.js';
import { startTestDaemon, testConfig, testProducer } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

// GET /v1/graph and the /graph page against the real index: layers by depth,
// and each node's state from what happened to it.

const db = await createTestDatabase();
const prefix = createTestPrefix();
const rollup = (id: string, upstream: string[], every: string, output?: string) => ({
  id,
  upstream,
  every,
  begin: '2026-11-02',
  rerun: 'on_replay',
  ...(output ? { output } : {}),
  target: { type: 'queue', queue: 'graph-runs' },
});
const config = testConfig(db, prefix, {
  assets: [
    { name: 'raw', freshness: { max_lag: 'PT1H' } },
    { name: 'lonely', domain: 'time' },
  ],
  rollups: [
    rollup('daily', ['agg.hourly'], 'day', 'agg.daily'),
    rollup('hourly', ['raw'], 'hour', 'agg.hourly'),
    rollup('report', ['agg.daily', 'raw'], 'day'),
  ],
});
const daemon = await startTestDaemon(config);
const producer = testProducer(config);
const hourly = defineRollups(config).find((r) => r.rollup.id === 'hourly')!.rollup;

const HOUR = 3_600_000;
const ms = (iso: string) => Date.parse(iso);
const rawHour = (hour: string, id: string) => ({
  asset: 'raw',
  start: hour,
  end: new Date(ms(hour) + HOUR).toISOString(),
  version: 'v1',
  id,
});
const untilRun = (hour: string) =>
  waitFor(
    async () =>
      (await db.sql`select 1 from runs where rollup_id = 'hourly' and period_lo = ${ms(hour) * 1000}`)
        .length > 0,
    { what: `a run of hourly ${hour}` },
  );

// biome-ignore lint/suspicious/noExplicitAny: read as untyped JSON
type Json = Record<string, any>;
const graph = async () => (await (await fetch(`${daemon.url}/v1/graph`)).json()) as Json;

describe('the graph', () => {
  it('lays out rollups and assets by depth, with edges for upstreams and outputs', async () => {
    const g = await graph();
    expect(g.nodes.map((n: Json) => [n.id, n.depth])).toEqual([
      ['asset:lonely', 0],
      ['asset:raw', 0],
      ['rollup:hourly', 1],
      ['asset:agg.hourly', 2],
      ['rollup:daily', 3],
      ['asset:agg.daily', 4],
      ['rollup:report', 5],
    ]);
    expect(g.edges).toEqual([
      { from: 'asset:agg.hourly', to: 'rollup:daily', role: 'upstream' },
      { from: 'rollup:daily', to: 'asset:agg.daily', role: 'output' },
      { from: 'asset:raw', to: 'rollup:hourly', role: 'upstream' },
      { from: 'rollup:hourly', to: 'asset:agg.hourly', role: 'output' },
      { from: 'asset:agg.daily', to: 'rollup:report', role: 'upstream' },
      { from: 'asset:raw', to: 'rollup:report', role: 'upstream' },
    ]);
  });

  it('shows failed runs, rerun pending, waiting and stale as they happen', async () => {
    // A month-old raw hour is far behind its max_lag: stale. Its run fails.
    await producer.add('e', rawHour('2026-11-02T10:00:00Z', 'a'));
    await untilRun('2026-11-02T10:00:00Z');
    await db.sql.begin((tx) =>
      reportRun(
        tx,
        { rollupId: 'hourly', lo: ms('2026-11-02T10:00:00Z') * 1000, generation: 1, attempt: 1 },
        { kind: 'target', state: 'failed', error: 'boom' },
        'callback',
        hourly.run,
        { record: 'all', rollup: hourly },
      ),
    );
    // Another hour is triggered, then reprocessed: rerun pending.
    await producer.add('e', rawHour('2026-11-02T11:00:00Z', 'b'));
    await untilRun('2026-11-02T11:00:00Z');
    await producer.add('replay', {
      type: 'replay_requirement',
      asset: 'raw',
      start: '2026-11-02T11:00:00Z',
      end: '2026-11-02T12:00:00Z',
      version: 'v2',
    });
    const g = await waitFor(
      async () => {
        const answer = await graph();
        const node = answer.nodes.find((n: Json) => n.id === 'rollup:hourly');
        return node.rerun_pending === 1 && node.failed_runs === 1 ? answer : undefined;
      },
      { what: 'hourly failed and rerun pending on the graph' },
    );
    const byId = new Map(g.nodes.map((n: Json) => [n.id, n]));
    expect(byId.get('rollup:hourly')).toMatchObject({
      state: 'failed',
      failed_runs: 1,
      rerun_pending: 1,
      triggered: 1,
    });
    expect(byId.get('rollup:daily')).toMatchObject({ state: 'waiting', failed_runs: 0, rerun_pending: 0 });
    expect(byId.get('asset:raw')).toMatchObject({
      state: 'stale',
      written_by: null,
      freshness: { stale: true },
    });
    expect(byId.get('asset:agg.hourly')).toMatchObject({
      state: 'unknown',
      written_by: 'hourly',
      freshness: { covered_until: null, stale: null },
    });
    expect(byId.get('asset:agg.daily')).toMatchObject({ written_by: 'daily' });

    const page = await fetch(`${daemon.url}/graph`);
    expect(page.status).toBe(200);
    const text = await page.text();
    expect(text).toContain('<svg class="graph-svg"');
    expect(text).toContain('1 failed · 1 rerun pending');
    expect(text).toContain('href="/?rollup=hourly"');
    expect(text).toContain('class="g-stale"');
    expect(text.match(/<path class="edge/g)).toHaveLength(6);
  });
});
