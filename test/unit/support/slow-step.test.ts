import { describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../../src/support/log.js';
import { whileSlow } from '../../../src/support/slow-step.js';

/** A logger whose lines are kept. */
function kept() {
  const lines: Array<{ msg: string; step?: string; seconds?: number }> = [];
  const log = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { lines, log };
}

describe('whileSlow', () => {
  it('says a step still runs while it runs, and stops saying it once it ends', async () => {
    // The interval's clock is vitest's: the lines are counted at exact instants, nothing waited.
    vi.useFakeTimers();
    try {
      const { lines, log } = kept();
      let finish = (_value: string) => {};
      const step = new Promise<string>((resolve) => {
        finish = resolve;
      });
      const done = whileSlow(log, 'creating the cluster', step, 20_000);
      await vi.advanceTimersByTimeAsync(19_999);
      expect(lines).toEqual([]);
      await vi.advanceTimersByTimeAsync(20_001);
      expect(lines).toHaveLength(2);
      expect(lines[1]).toMatchObject({
        step: 'creating the cluster',
        seconds: 40,
        msg: 'still creating the cluster (40 s so far)',
      });
      finish('made');
      await expect(done).resolves.toBe('made');
      await vi.advanceTimersByTimeAsync(100_000); // five intervals more: nothing more is said
      expect(lines).toHaveLength(2);
    } finally {
      vi.useRealTimers();
    }
  });

  it('says nothing of a step quicker than the interval, and passes its failure on', async () => {
    const { lines, log } = kept();
    await expect(whileSlow(log, 'migrating', Promise.resolve(3), 1_000)).resolves.toBe(3);
    await expect(whileSlow(log, 'migrating', Promise.reject(new Error('no')), 1_000)).rejects.toThrow('no');
    expect(lines).toEqual([]);
  });
});
