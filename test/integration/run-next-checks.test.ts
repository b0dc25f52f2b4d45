/**
 * A check and a wake-up of the same run at once: the completion event of a job removed
 * on completion can arrive while a check that found the job gone is still recording it lost. The
 * wake-up (checkSoon) must survive the check's own next-check write, or the run stays lost.
 */
import { describe, expect, it } from 'vitest';
import { checkSoon, setNextChecks } from '../../src/store/runs/next-checks.js';
import { runsToCheck } from '../../src/store/runs/work.js';
import { createTestDatabase } from '../helpers/db.js';

const { sql } = await createTestDatabase();
await sql`insert into rollups (id, definition, calendar_hash, definition_hash) values ('tidy', '{}', 'h', 'd')`;

async function openRun(lo: number): Promise<string> {
  const runId = `tidy@${lo}#1`;
  await sql`insert into periods (rollup_id, lo, hi, key, state, generation, run_attempt, run_state)
    values ('tidy', ${lo}, ${lo + 3_600}, ${`p${lo}`}, 'triggered', 1, 1, 'started')`;
  await sql`insert into triggers (rollup_id, period_lo, generation, idempotency_key, reason, lease_token, target, payload, decided_at, delivered_at)
    values ('tidy', ${lo}, 1, ${runId}, 'covered', 1, '{"type": "queue", "queue": "tidy"}', '{}', now(), now())`;
  await sql`insert into runs (rollup_id, period_lo, generation, attempt, run_id, state, cause, created_at, started_at, check_at)
    values ('tidy', ${lo}, 1, 1, ${runId}, 'started', 'trigger', now(), now(), clock_timestamp() - interval '1 second')`;
  return runId;
}

const checkAt = async (runId: string) =>
  (await sql<{ check_at: Date | null }[]>`select check_at from runs where run_id = ${runId}`)[0]!.check_at;

describe('next checks', () => {
  it('a wake-up that arrives while a check is asking is kept; without one, the check decides', async () => {
    const woken = await openRun(0);
    const [due] = (await runsToCheck(sql, 10)).filter((r) => r.runId === woken);
    expect(due).toBeDefined();
    // The check found the job gone and records the run lost (no further check) ...
    await sql`update runs set state = 'lost', finished_at = now() where run_id = ${woken}`;
    // ... while the completion event is read: ask about the run at once.
    await checkSoon(sql, [woken]);
    await setNextChecks(sql, [{ run: due!.run, afterMs: null, seen: due!.checkSeen }]);
    expect(await checkAt(woken)).not.toBeNull();

    // The same write with no wake-up in between is the check's to make.
    const [again] = (await runsToCheck(sql, 10)).filter((r) => r.runId === woken);
    await setNextChecks(sql, [{ run: again!.run, afterMs: null, seen: again!.checkSeen }]);
    expect(await checkAt(woken)).toBeNull();
  });

  it('a check of a run nobody woke sets its next check', async () => {
    const runId = await openRun(3_600);
    const [due] = (await runsToCheck(sql, 10)).filter((r) => r.runId === runId);
    await setNextChecks(sql, [{ run: due!.run, afterMs: 60_000, seen: due!.checkSeen }]);
    const next = await checkAt(runId);
    expect(next!.getTime()).toBeGreaterThan(Date.now() + 30_000);
  });
});
