import { describe, expect, it } from 'vitest';
import { StallGuard } from '../../../src/ingest/pg-stall.js';
import { createLogger } from '../../../src/support/log.js';
import { waitFor } from '../../helpers/wait.js';

/** A guard over a fake commit age and probe; the test flips them and watches what it does. */
function harness(boundMs = 100) {
  const state = { commitMs: 0, answers: true, checks: 0, probes: 0, pauses: 0, resumes: 0 };
  const guard = new StallGuard({
    boundMs,
    oldestCommitMs: () => {
      state.checks++;
      return state.commitMs;
    },
    probe: async () => {
      state.probes++;
      return state.answers;
    },
    pause: async () => {
      state.pauses++;
      return 3;
    },
    resume: async () => {
      state.resumes++;
    },
    log: createLogger('silent'),
  });
  guard.start();
  return { state, guard };
}

describe('StallGuard', () => {
  it('probes nothing while commits are quick', async () => {
    const { state, guard } = harness();
    state.commitMs = 10;
    await waitFor(() => state.checks >= 5);
    await guard.stop();
    expect(state.probes).toBe(0);
    expect(guard.paused).toBe(false);
  });

  it('a slow commit while PostgreSQL answers pauses nothing', async () => {
    const { state, guard } = harness();
    state.commitMs = 1000;
    await waitFor(() => state.probes >= 3);
    await guard.stop();
    expect(state.pauses).toBe(0);
    expect(guard.paused).toBe(false);
  });

  it('a stuck commit with PostgreSQL silent pauses once, and it resumes when PostgreSQL answers', async () => {
    const { state, guard } = harness();
    state.answers = false;
    state.commitMs = 1000;
    await waitFor(() => guard.paused);
    expect(state.pauses).toBe(1);
    // Paused, the commits it gave back no longer count; it keeps probing and stays paused.
    state.commitMs = 0;
    const probes = state.probes;
    await waitFor(() => state.probes >= probes + 3);
    expect(state.pauses).toBe(1);
    expect(state.resumes).toBe(0);
    state.answers = true;
    await waitFor(() => !guard.paused);
    await guard.stop();
    expect(state.resumes).toBe(1);
    expect(state.pauses).toBe(1);
  });
});
