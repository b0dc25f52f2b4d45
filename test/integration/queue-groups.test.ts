import { afterAll, describe, expect, it } from 'vitest';
import { groupOf } from '../../src/core/events/routing.js';
import { queueConnection } from '../../src/queue/backend.js';
import { EventQueues } from '../../src/queue/event-queues.js';
import { queueGroups } from '../../src/queue/groups.js';
import { createTestDatabase } from '../helpers/db.js';
import { uniqueName } from '../helpers/env.js';
import { drained, indexCoverage, ingestConfig, MINUTE, micros, startWorker } from './ingest-harness.js';

const db = await createTestDatabase();
const prefix = uniqueName('crgroups');
const config = ingestConfig(db, prefix, { queue: { groups: 2 } });
const connection = queueConnection(config);
const producer = new EventQueues(connection, config.queue);
const [q0, q1] = producer.queues;
afterAll(async () => {
  await producer.close();
  for (const group of queueGroups(config.queue)) await connection.deleteNamespace(group.prefix);
  await connection.close();
});

// One asset per group.
const ZERO = 'grp.b';
const ONE = 'grp.c';
const events = (asset: string) =>
  Array.from({ length: 10 }, (_, i) => ({
    asset,
    start: new Date(Date.parse('2025-06-01T00:00:00Z') + i * 60_000).toISOString(),
    end: new Date(Date.parse('2025-06-01T00:00:00Z') + (i + 1) * 60_000).toISOString(),
  }));
const whole = [{ start: micros('2025-06-01T00:00:00Z'), end: micros('2025-06-01T00:00:00Z') + 10 * MINUTE }];

describe(`queue groups on one ${config.queue.backend === 'redis' ? 'Redis' : 'PostgreSQL'}`, () => {
  it('routes each asset to its group, and an instance consumes only the groups it lists', async () => {
    expect([groupOf(ZERO, 2), groupOf(ONE, 2)]).toEqual([0, 1]);
    await producer.addBulk([...events(ZERO), ...events(ONE)]);
    expect((await q0!.getJobCounts('waiting')).waiting).toBe(10);
    expect((await q1!.getJobCounts('waiting')).waiting).toBe(10);

    // An instance that consumes no group (API only) takes nothing from either queue.
    const none = startWorker(ingestConfig(db, prefix, { queue: { groups: 2, consume: [] } }));
    const second = startWorker(parseConsume(1));
    await drained(q1!);
    expect(await indexCoverage(db.sql, ONE)).toEqual(whole);
    // No worker listens on group 0 yet: its jobs wait untouched.
    expect(await q0!.getJobCounts('waiting', 'active')).toEqual({ waiting: 10, active: 0 });
    expect(await indexCoverage(db.sql, ZERO)).toEqual([]);

    const first = startWorker(parseConsume(0));
    await drained(q0!);
    expect(await indexCoverage(db.sql, ZERO)).toEqual(whole);
    await Promise.all([first.stop(), second.stop(), none.stop()]);
  });
});

function parseConsume(group: number) {
  return ingestConfig(db, prefix, { queue: { groups: 2, consume: [group] } });
}
