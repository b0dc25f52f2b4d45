/**
 * A run's first delivery skips the look-up for an earlier one, and only its first: the outbox read
 * counts a send begun on each run it takes, committed before any goes out, so a delivery that
 * reached Airflow but was never recorded (a crash between the two) is looked up, not sent again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TriggerPayload } from '../../src/core/runs/trigger.js';
import { dueRuns } from '../../src/store/runs/work.js';
import { airflowAssetTarget } from '../../src/targets/airflow/asset.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { startFakeAirflow } from '../helpers/fake-airflow.js';

const fake = await startFakeAirflow({ users: { coverage: 'pa55-word-for-airflow' }, assets: ['hourly'] });
let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(() => fake.close());

const KEY = 'fs@2026-12-07T10#1';
const payload = {
  rollup: 'fs',
  idempotency_key: KEY,
  run_id: KEY,
  attempt: 1,
  generation: 1,
  reason: 'covered',
  period: { start: '2026-12-07T10:00:00Z', end: '2026-12-07T11:00:00Z', key: '2026-12-07T10' },
  upstreams: {},
  decided_at: new Date().toISOString(),
} as unknown as TriggerPayload;

const eventLookups = () =>
  fake.requests.filter((r) => r.method === 'GET' && r.path.startsWith('/api/v2/assets/events'));

describe('the first delivery of a run', () => {
  it('goes out without a look-up; after a crash before it was recorded, the next one looks and finds it', async () => {
    const lo = Date.parse('2026-12-07T10:00:00Z');
    await db.sql`
      insert into rollups (id, definition, calendar_hash, definition_hash)
      values ('fs', ${db.sql.json({ id: 'fs' } as never)}, 'c', 'h')`;
    await db.sql`insert into periods (rollup_id, lo, hi, key) values ('fs', ${lo}, ${lo + 3_600_000}, '2026-12-07T10')`;
    await db.sql`
      insert into triggers (rollup_id, period_lo, generation, idempotency_key, reason, lease_token, target, payload)
      values ('fs', ${lo}, 1, ${KEY}, 'covered', 1, '{"type":"airflow_asset"}', ${db.sql.json(payload as never)})`;
    await db.sql`
      insert into runs (rollup_id, period_lo, generation, attempt, run_id, cause, due_at)
      values ('fs', ${lo}, 1, 1, ${KEY}, 'trigger', now())`;
    const target = airflowAssetTarget({
      url: fake.url,
      asset: 'hourly',
      username: 'coverage',
      password: 'pa55-word-for-airflow',
      timeout: 5000,
      partition_key_format: '%Y-%m-%dT%H:%M:%S',
    });

    const [taken] = await dueRuns(db.sql, 10, ['fs']);
    expect(taken?.earlierSends).toBe(0);
    expect(await target.deliver(payload, { first: taken!.earlierSends === 0 })).toEqual({ ok: true });
    expect(fake.events).toHaveLength(1);
    expect(eventLookups(), 'a first delivery has nothing to look for').toHaveLength(0);

    // The daemon stops here, its delivery never recorded: the run is still pending and due.
    const [again] = await dueRuns(db.sql, 10, ['fs']);
    expect(again?.earlierSends, 'the send begun before the crash was counted').toBe(1);
    expect(await target.deliver(payload, { first: again!.earlierSends === 0 })).toEqual({ ok: true });
    expect(eventLookups()).toHaveLength(1);
    expect(fake.events, 'the redelivery found its event and posted none').toHaveLength(1);
  });
});
