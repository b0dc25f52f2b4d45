import { afterAll, describe, expect, it } from 'vitest';
import type { TriggerPayload } from '../../src/core/runs/trigger.js';
import { type AirflowAssetConfig, airflowAssetTarget } from '../../src/targets/airflow/asset.js';
import type { Target } from '../../src/targets/target.js';
import { startFakeAirflow } from '../helpers/fake-airflow.js';

// The airflow_asset target against the stand-in (test/real/airflow-asset.real.test.ts runs the same
// against real Airflow 3.3.2): lookups, keys, redelivery and following a DAG's run.
const fake = await startFakeAirflow({
  users: { coverage: 'pa55-word-for-airflow' },
  assets: ['other', 'orders_hourly'],
  maximumPageLimit: 100,
});
afterAll(() => fake.close());

let hour = 0;
function payload(attempt = 1): TriggerPayload {
  const start = new Date(Date.UTC(2026, 9, 25, hour++));
  const iso = (d: Date) => d.toISOString().replace('.000Z', 'Z');
  const key = `r@${iso(start).replace(/[-:]/g, '')}#1`;
  return {
    rollup: 'r',
    idempotency_key: key,
    run_id: attempt > 1 ? `${key}~a${attempt}` : key,
    attempt,
    generation: 1,
    reason: 'covered',
    period: {
      start: iso(start),
      end: iso(new Date(start.getTime() + 3_600_000)),
      key: iso(start).slice(0, 13),
    },
    upstreams: {},
    decided_at: new Date().toISOString(),
  } as unknown as TriggerPayload;
}
const config = (extra: Partial<AirflowAssetConfig> = {}): AirflowAssetConfig => ({
  url: fake.url,
  asset: 'orders_hourly',
  username: 'coverage',
  password: 'pa55-word-for-airflow',
  timeout: 5000,
  partition_key_format: '%Y-%m-%dT%H:%M:%S',
  partition_timezone: 'Europe/Berlin',
  ...extra,
});

async function observed(target: Target, p: TriggerPayload, runId: string) {
  const answer = await target.observe!([{ runId, payload: p }]);
  if ('error' in answer) throw new Error(String(answer.error));
  return answer.get(runId);
}

describe('airflow_asset target', () => {
  it('posts one event on the asset found by name, keyed by the period start in the zone, the payload in extra', async () => {
    const target = airflowAssetTarget(config());
    const p = payload();
    expect(await target.deliver(p)).toEqual({ ok: true });
    const event = fake.events.at(-1)!;
    expect(event).toMatchObject({ asset_id: 2, partition_key: '2026-10-25T02:00:00' });
    expect(event.extra).toEqual({ ...p, from_rest_api: true });
    // The asset is looked up once.
    await target.deliver(payload());
    expect(fake.requests.filter((r) => r.path.startsWith('/api/v2/assets?'))).toHaveLength(1);
  });

  it('a redelivery finds its event and posts nothing; another attempt is an event of its own', async () => {
    const target = airflowAssetTarget(config());
    const p = payload();
    const before = fake.events.length;
    expect(await target.deliver(p)).toEqual({ ok: true });
    expect(await target.deliver(p)).toEqual({ ok: true });
    expect(fake.events.length).toBe(before + 1);
    expect(
      await target.deliver({ ...p, attempt: 2, run_id: `${p.idempotency_key}~a2` } as TriggerPayload),
    ).toEqual({
      ok: true,
    });
    expect(fake.events.length).toBe(before + 2);
  });

  it('finds a redelivered event past a page Airflow cut short ([api] maximum_page_limit)', async () => {
    const capped = await startFakeAirflow({
      users: { coverage: 'pa55-word-for-airflow' },
      assets: ['orders_hourly'],
      maximumPageLimit: 2,
    });
    try {
      const target = airflowAssetTarget(config({ url: capped.url }));
      const [first, ...rest] = [payload(), payload(), payload()];
      for (const p of [first!, ...rest]) expect(await target.deliver(p)).toEqual({ ok: true });
      // The first is the oldest: on the second page of two, newest first.
      expect(await target.deliver(first!)).toEqual({ ok: true });
      expect(capped.events).toHaveLength(3);
    } finally {
      await capped.close();
    }
  });

  it('an asset Airflow does not know (yet) is a retried error naming it', async () => {
    const result = await airflowAssetTarget(config({ asset: 'orders' })).deliver(payload());
    expect(result).toEqual({ ok: false, retry: true, error: 'Airflow has no asset orders (yet)' });
    const byUri = airflowAssetTarget(config({ asset: undefined, asset_uri: 'uri:other' }));
    expect(await byUri.deliver(payload())).toEqual({ ok: true });
    expect(fake.events.at(-1)!.asset_id).toBe(1);
  });

  it('without follow_dag_id a run succeeds once delivered; with it, it is the DAG run created from the event', async () => {
    const p = payload();
    const plain = airflowAssetTarget(config());
    await plain.deliver(p);
    expect(await plain.observe!([{ runId: 'x', payload: p }])).toEqual(
      new Map([['x', { kind: 'target', state: 'succeeded' }]]),
    );
    const follow = airflowAssetTarget(config({ follow_dag_id: 'hourly' }));
    // Not scheduled yet: nothing to say.
    expect(await follow.observe!([{ runId: 'x', payload: p }])).toEqual(new Map([['x', null]]));
    const event = fake.events.find((e) => e.extra.run_id === p.run_id)!;
    fake.runFromEvent(event.id, 'other_dag', 'other_run');
    fake.runFromEvent(event.id, 'hourly', 'asset_triggered__1');
    expect(await observed(follow, p, 'x')).toMatchObject({ state: 'running' });
    fake.setState('hourly', 'asset_triggered__1', 'failed');
    expect(await observed(follow, p, 'x')).toMatchObject({ state: 'failed' });
    // An event Airflow no longer has: lost.
    const gone = payload();
    expect(await observed(follow, gone, 'y')).toMatchObject({ state: 'lost' });
  });
});
