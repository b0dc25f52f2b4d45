/**
 * A manual trigger of a rollup the lease holder has not taken up yet (here: no instance schedules,
 * as between a PUT or a reload and the next pass) answers 503 with Retry-After, not a 500 from the
 * database's foreign key; once the scheduler has recorded the rollup, the same request is taken (202).
 */
import { expect, it } from 'vitest';
import { startTestDaemon, TEST_TOKEN, testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const day = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
const db = await createTestDatabase();
const config = testConfig(db, createTestPrefix(), {
  rollups: [
    {
      id: 'later',
      upstream: ['later.in'],
      every: 'hour',
      begin: day,
      target: { type: 'queue', queue: 'later-runs' },
    },
  ],
});
const trigger = (daemon: Awaited<ReturnType<typeof startTestDaemon>>) =>
  daemon.http.inject({
    method: 'POST',
    url: `/v1/rollups/later/periods/${day}T03/trigger`,
    headers: { authorization: `Bearer ${TEST_TOKEN}` },
  });

it('answers 503 with Retry-After until the scheduler has recorded the rollup, then takes it', async () => {
  const serving = await startTestDaemon({ ...config, scheduler: { ...config.scheduler, enabled: false } });
  const early = await trigger(serving);
  expect(early.statusCode, early.body).toBe(503);
  expect(early.headers['retry-after']).toBe('1');
  expect(early.json()).toMatchObject({
    code: 'rollup_not_recorded',
    message: expect.stringContaining('later'),
  });

  await startTestDaemon(config); // schedules: its first pass records the rollup
  await waitFor(
    async () => {
      const answer = await trigger(serving);
      if (answer.statusCode !== 202) throw new Error(`${answer.statusCode} ${answer.body}`);
      return true;
    },
    { what: 'the trigger taken once the rollup is recorded' },
  );
});
