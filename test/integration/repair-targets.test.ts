/**
 * Repair request delivery to each target type, against a webhook receiver, the fake
 * Airflow 3 API (which validates TriggerDAGRunPostBody and CreateAssetEventsBody; the real one in
 * test/real/airflow-repair.real.test.ts) and the test Redis: the payload as sent,
 * the attempt's key where each target dedupes, and a redelivery that creates nothing new.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { repairPayload } from '../../src/core/repair-payload.js';
import { queueConnection } from '../../src/queue/backend.js';
import { Targets } from '../../src/targets/index.js';
import { REPAIR_JOB_NAME, RepairTargets } from '../../src/targets/repair-targets.js';
import { redactTarget } from '../../src/targets/secrets.js';
import { testQueue } from '../helpers/daemon.js';
import { REDIS_URL } from '../helpers/env.js';
import { startFakeAirflow } from '../helpers/fake-airflow.js';
import { createTestPrefix } from '../helpers/redis.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';

const prefix = createTestPrefix();
const queues = queueConnection({
  database_url: 'postgres://unused',
  redis_url: REDIS_URL,
  queue: { backend: 'redis' } as never,
});
const payload = repairPayload({
  id: 9,
  attempt: 2,
  asset: 'warehouse.orders',
  ranges: [{ start: 0, end: 60_000_000, kind: 'replay_required', requiredVersion: 'v4' }],
  rangesTotal: 1,
  missingTotal: 60_000_000,
  rollup: 'orders_hourly',
  period: { start: '1970-01-01T00:00:00Z', end: '1970-01-01T01:00:00Z', key: '1970-01-01T00' },
  format: (p) => new Date(p / 1000).toISOString(),
  unitSeconds: 1e-6,
  requestedAt: new Date('2026-06-01T12:00:00Z'),
});
const sink = await startWebhookSink();
const airflow = await startFakeAirflow({
  users: { backfill: 'pw-0123456789' },
  assets: ['orders_repairs'],
});
const webhook = { type: 'webhook' as const, url: sink.url, headers: { 'X-Team': 'data' }, timeout: 5000 };
const dag = {
  type: 'airflow' as const,
  url: airflow.url,
  dag_id: 'orders_backfill',
  username: 'backfill',
  password: 'pw-0123456789',
  timeout: 5000,
};
const asset = {
  type: 'airflow_asset' as const,
  url: airflow.url,
  asset: 'orders_repairs',
  username: 'backfill',
  password: 'pw-0123456789',
  timeout: 5000,
  partition_key_format: '%Y-%m-%dT%H:%M:%S',
};
const queue = { type: 'queue' as const, queue: 'repair-deliveries' };
const targets = new RepairTargets(queues, prefix, [webhook, dag, asset, queue]);
const received = testQueue('repair-deliveries', prefix);
afterAll(async () => {
  await targets.close();
  await queues.close();
  await sink.close();
  await airflow.close();
});

describe('repair request targets', () => {
  it('webhook: POSTs the payload with the attempt key as Idempotency-Key', async () => {
    expect(await targets.deliver(redactTarget(webhook), payload)).toEqual({ ok: true });
    expect(sink.calls).toEqual([{ key: 'repair-9~a2', body: payload, at: expect.any(Number) }]);
  });

  it('queue: one job per attempt, named repair, under the key, however often it is delivered', async () => {
    expect(await targets.deliver(redactTarget(queue), payload)).toEqual({ ok: true });
    expect(await targets.deliver(redactTarget(queue), payload)).toEqual({ ok: true });
    const jobs = await received.getJobs(['waiting']);
    expect(jobs.map((j) => [j.id, j.name])).toEqual([['repair-9~a2', REPAIR_JOB_NAME]]);
    expect(jobs[0]!.data).toEqual(payload);
  });

  it('airflow: a dag run of the backfill DAG with the request in conf and no logical date; a redelivery is the same run', async () => {
    // The password is a literal in the config: resolved from the live config, never stored.
    expect(await targets.deliver(redactTarget(dag), payload)).toEqual({ ok: true });
    expect(await targets.deliver(redactTarget(dag), payload)).toEqual({ ok: true });
    const runs = airflow.runs.get('orders_backfill') ?? [];
    expect(runs).toHaveLength(1);
    expect(runs[0]).toMatchObject({
      dag_run_id: 'coverage_rollup__repair-9~a2',
      logical_date: null,
      conf: payload,
    });
    expect(airflow.to('/api/v2/dags/orders_backfill/dagRuns').map((r) => r.status)).toEqual([200, 409]);
  });

  it('airflow_asset: an asset event with the request in extra and no partition key; a redelivery finds it and posts none', async () => {
    expect(await targets.deliver(redactTarget(asset), payload)).toEqual({ ok: true });
    expect(await targets.deliver(redactTarget(asset), payload)).toEqual({ ok: true });
    expect(airflow.events).toHaveLength(1);
    expect(airflow.events[0]!.asset_id).toBe(1);
    expect(airflow.events[0]!.partition_key ?? null).toBeNull();
    expect(airflow.events[0]!.extra).toEqual({ ...payload, from_rest_api: true });
    // The next attempt is an event of its own.
    const next = { ...payload, attempt: 3, idempotency_key: 'repair-9~a3' };
    expect(await targets.deliver(redactTarget(asset), next)).toEqual({ ok: true });
    expect(airflow.events.map((e) => e.extra?.idempotency_key)).toEqual(['repair-9~a2', 'repair-9~a3']);
  });

  it('a target that cannot be made (a queue name with a colon, stored before the config refused it) fails its own deliveries, not the caller', async () => {
    const colon = { type: 'queue' as const, queue: 'repair:deliveries' };
    const result = await targets.deliver(colon, payload);
    expect(result).toMatchObject({ ok: false, retry: false });
    expect(JSON.stringify(result)).toContain('cannot be used');
    const triggers = new Targets(queues, prefix, []);
    try {
      const trigger = await triggers.deliver(colon, { idempotency_key: 'r@x#1' } as never);
      expect(trigger).toMatchObject({ ok: false, retry: false });
      expect(await triggers.observe(colon, [])).toMatchObject({
        error: expect.stringContaining('cannot be used'),
      });
    } finally {
      await triggers.close();
    }
  });

  it('a refused delivery is final and its error never carries a secret', async () => {
    airflow.failures.orders_backfill = [422];
    const other = { ...payload, idempotency_key: 'repair-10~a1' };
    const result = await targets.deliver(redactTarget(dag), other);
    expect(result).toMatchObject({ ok: false, retry: false });
    expect(JSON.stringify(result)).not.toContain('pw-0123456789');
  });
});
