import { describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/support/log.js';
import { whileSlow } from '../../../src/support/slow-step.js';
import { waitFor } from '../../helpers/wait.js';

/** A logger whose lines are kept. */
function kept() {
  const lines: Array<{ msg: string; step?: string; seconds?: number }> = [];
  const log = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { lines, log };
}

describe('whileSlow', () => {
  it('says a step still runs while it runs, and stops saying it once it ends', async () => {
    const { lines, log } = kept();
    let finish = (_value: string) => {};
    const step = new Promise<string>((resolve) => {
      finish = resolve;
    });
    const done = whileSlow(log, 'creating the cluster', step, 20);
    await waitFor(() => lines.length >= 2, { what: 'two progress lines' });
    expect(lines[0]).toMatchObject({
      step: 'creating the cluster',
      msg: expect.stringMatching(/^still creating the cluster \(\d+ s so far\)$/),
    });
    finish('made');
    await expect(done).resolves.toBe('made');
    const said = lines.length;
    await new Promise((resolve) => setTimeout(resolve, 100)); // five intervals: nothing more is said
    expect(lines.length).toBe(said);
  });

  it('says nothing of a step quicker than the interval, and passes its failure on', async () => {
    const { lines, log } = kept();
    await expect(whileSlow(log, 'migrating', Promise.resolve(3), 1_000)).resolves.toBe(3);
    await expect(whileSlow(log, 'migrating', Promise.reject(new Error('no')), 1_000)).rejects.toThrow('no');
    expect(lines).toEqual([]);
  });
});
