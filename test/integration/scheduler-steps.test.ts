/**
 * A scheduler step that fails on every pass (the repair step, its table renamed away) does not
 * hold up the others: periods are still marked, decided and delivered, and the run after the
 * failing step in the pass is still followed to its outcome. The failure is counted under its step.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { startDaemon } from '../../src/daemon/daemon.js';
import { queueConnection } from '../../src/queue/backend.js';
import { createLogger } from '../../src/support/log.js';
import { testConfig, testProducer } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const day = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
const db = await createTestDatabase();
const prefix = createTestPrefix();
const config = testConfig(db, prefix, {
  scheduler: { run_check_every: 'PT0.1S' },
  rollups: [
    {
      id: 'steps',
      upstream: ['steps.in'],
      every: 'hour',
      begin: day,
      run: { retries: 0 },
      target: { type: 'queue', queue: 'steps-runs' },
    },
  ],
});
const producer = testProducer(config);
const queues = queueConnection(config);
const worker = queues.worker('steps-runs', prefix, async () => 'done');

// Every pass's repair step reads repair_attempts first (repairWork): it fails from the start.
await db.sql`alter table repair_attempts rename to repair_attempts_away`;
const daemon = await startDaemon(config, createLogger(config.log_level));

afterAll(async () => {
  await db.sql`alter table repair_attempts_away rename to repair_attempts`;
  await daemon.stop();
  await worker.close();
  await queues.close();
});

const failures = async () =>
  Object.fromEntries(
    (await daemon.metrics.schedulerStepFailures.get()).values.map((v) => [v.labels.step, v.value]),
  );

describe('a failing scheduler step', () => {
  it('is counted under its own step while marking, evaluation, delivery and run following go on', async () => {
    await producer.add('e', {
      asset: 'steps.in',
      start: `${day}T03:00:00Z`,
      end: `${day}T04:00:00Z`,
      version: 'v1',
    });
    // Read from the table: the period's HTTP view reads the renamed repair table too.
    const run = await waitFor(
      async () => {
        const [row] = await db.sql<{ attempt: number; state: string }[]>`
          select attempt, state from runs where rollup_id = 'steps'`;
        return row?.state === 'succeeded' ? row : undefined;
      },
      { what: "the period's run followed to succeeded", timeout: 30_000 },
    );
    expect(run).toMatchObject({ attempt: 1, state: 'succeeded' });
    const counted = await failures();
    expect(counted.repairs).toBeGreaterThanOrEqual(1);
    expect({ ...counted, repairs: 0 }).toEqual({
      mark: 0,
      evaluate: 0,
      deadlines: 0,
      deliver: 0,
      repairs: 0,
      runs: 0,
      wake: 0,
    });
  });
});
