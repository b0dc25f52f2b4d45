/**
 * A repair request's new attempt supersedes the older ones (re-sent "with the ranges still
 * missing"): an older attempt still failing to reach its target is no longer due beside it.
 */
import { beforeAll, expect, it } from 'vitest';
import type { RepairPayload } from '../../src/core/repair-payload.js';
import { dueAttempts, insertAttempts } from '../../src/store/repairs/attempts.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase();
});

it('stops delivering attempt 1 once attempt 2 is made, and leaves other requests alone', async () => {
  const ids: number[] = [];
  for (const lo of [0, 10]) {
    const [row] = await db.sql<{ id: number }[]>`
      insert into repair_requests (asset, domain, rollup_id, period_lo, period, state, span, ranges, ranges_total,
        missing_total, attempt, attempts, every_ms, target, requested_at, next_at)
      values ('sup.asset', 'time', null, null, null, 'open', ${`{[${lo},${lo + 10})}`}::int8multirange,
        '[]', 1, 10, 1, 5, 3600000, '{"type": "queue", "queue": "q"}', now(), now())
      returning id`;
    ids.push(row!.id);
  }
  const payload = (id: number, attempt: number) =>
    ({ idempotency_key: `repair-${id}~a${attempt}` }) as RepairPayload;
  const t0 = new Date('2026-12-06T00:00:00Z');
  await db.sql.begin((tx) =>
    insertAttempts(
      tx,
      ids.map((id) => ({ id, attempt: 1, payload: payload(id, 1), leaseToken: null })),
      t0,
    ),
  );
  const due = async () =>
    (await dueAttempts(db.sql, new Date(t0.getTime() + 60_000), 100)).map((a) => [a.requestId, a.attempt]);
  expect((await due()).sort()).toEqual([
    [ids[0], 1],
    [ids[1], 1],
  ]);
  // The first request's attempt 1 never reached its target; attempt 2 is made.
  await db.sql.begin((tx) =>
    insertAttempts(tx, [{ id: ids[0]!, attempt: 2, payload: payload(ids[0]!, 2), leaseToken: null }], t0),
  );
  expect((await due()).sort()).toEqual([
    [ids[0], 2],
    [ids[1], 1],
  ]);
});
