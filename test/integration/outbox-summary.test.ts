/**
 * `coverage-rollup status`'s and the status page's "last trigger": a pass decides many periods at one instant (a first
 * start's deadline catch-up), and the newest of them must be the one named, not the first row read.
 */
import { beforeAll, expect, it } from 'vitest';
import { latestTrigger, outboxSummary } from '../../src/store/triggers.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

it('names the latest period of the latest instant, whatever order the rows were written in', async () => {
  await db.sql`
    insert into rollups (id, definition, calendar_hash, definition_hash)
    values ('tie', ${db.sql.json({ id: 'tie' } as never)}, 'c', 'h')`;
  const at = new Date('2026-12-05T21:00:00Z');
  // Written oldest period first, so the first row of the instant is the oldest period.
  for (const lo of [0, 1, 2, 3, 4]) {
    await db.sql`insert into periods (rollup_id, lo, hi, key) values ('tie', ${lo}, ${lo + 1}, ${`k${lo}`})`;
    await db.sql`
      insert into triggers (rollup_id, period_lo, generation, idempotency_key, reason, lease_token, target, payload,
        decided_at, delivered_at)
      values ('tie', ${lo}, 1, ${`tie@k${lo}#1`}, 'deadline', 1, '{"type":"queue","queue":"q"}', '{}', ${at}, ${at})`;
  }
  // The status page's "last trigger" too.
  expect((await latestTrigger(db.sql, 'tie'))?.key).toBe('k4');
  expect(await outboxSummary(db.sql, ['tie'])).toEqual([
    { id: 'tie', last_trigger: 'tie@k4#1', undelivered: 0 },
  ]);
});
