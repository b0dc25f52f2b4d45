/**
 * An idle scheduler sleeps until its next work. A rollup without a deadline has nothing for the
 * deadline sweep to do, ever: its sweep once said "due now" forever, so every pass ended with a
 * sleep of 0 and the lease holder ran back-to-back passes (about 350 a second with one such rollup,
 * half a core), allocating as it went (issue 38).
 */
import { describe, expect, it } from 'vitest';
import { startTestDaemon, testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { nextEvent } from '../helpers/scheduler-events.js';

const db = await createTestDatabase();
const prefix = createTestPrefix();
const rollup = (id: string, policy: Record<string, unknown>) => ({
  id,
  upstream: [`idle.${id}`],
  every: 'hour',
  timezone: 'UTC',
  begin: '2026-11-02',
  policy,
  target: { type: 'queue', queue: 'idle-runs' },
});

describe('an idle pass', () => {
  it('sleeps (sleepMs > 0) with a rollup without a deadline', async () => {
    const { scheduler } = await startTestDaemon(
      testConfig(db, prefix, { rollups: [rollup('plain', { settle: 'PT0S' })] }),
    );
    // A pass after the lease's first ones (which may still have work), with nothing to do.
    await nextEvent(scheduler!, 'pass', (p) => !p.busy && !p.marked && p.evaluated === 0, {
      what: 'an idle pass',
    });
    const idle = nextEvent(scheduler!, 'pass', (p) => !p.busy, { what: 'the next idle pass' });
    scheduler!.kick();
    const pass = await idle;
    expect(pass.sleepMs).toBeGreaterThan(0);
  });
});
