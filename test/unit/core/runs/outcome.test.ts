import { describe, expect, it } from 'vitest';
import { OUTCOME_SOURCES, outcomesFor, resolveOutcome } from '../../../../src/core/runs/outcome.js';

const webhook = { type: 'webhook', followed: false };
const queue = { type: 'queue', followed: true };

describe('run.outcome', () => {
  it('a target that cannot be asked about its runs succeeds them on delivery unless the rollup waits for a callback', () => {
    expect(resolveOutcome(webhook, undefined)).toEqual({ outcome: 'delivery' });
    expect(resolveOutcome(webhook, 'callback')).toEqual({ outcome: 'callback' });
    expect(resolveOutcome(webhook, 'delivery')).toEqual({ outcome: 'delivery' });
  });

  it('a followed target keeps following its outcomes: target, and nothing else', () => {
    expect(resolveOutcome(queue, undefined)).toEqual({ outcome: 'target' });
    expect(resolveOutcome(queue, 'target')).toEqual({ outcome: 'target' });
    for (const set of ['callback', 'delivery'] as const) {
      const answer = resolveOutcome(queue, set);
      expect(answer).toEqual({
        problem: expect.stringContaining(`${set} is for a target that cannot be asked`),
      });
      expect(answer).toEqual({ problem: expect.stringContaining('leave run.outcome out') });
    }
  });

  it('refuses target on a webhook, saying what it takes', () => {
    expect(resolveOutcome(webhook, 'target')).toEqual({
      problem: expect.stringMatching(/cannot be asked .* delivery \(the default.*\) or callback/),
    });
  });

  it('every target takes its default and exactly its own outcomes', () => {
    for (const target of [webhook, queue]) {
      const allowed = outcomesFor(target);
      expect(resolveOutcome(target, undefined)).toEqual({ outcome: allowed[0] });
      for (const set of OUTCOME_SOURCES)
        expect('outcome' in resolveOutcome(target, set)).toBe(allowed.includes(set));
    }
  });
});
