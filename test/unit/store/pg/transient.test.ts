import { describe, expect, it } from 'vitest';
import { retryTransient } from '../../../../src/store/pg/transient.js';

const reset = () => Object.assign(new Error('reset'), { code: 'ECONNRESET' });
const noSleep = async () => {};

/** A statement failing with each of `errors` in turn, then answering; `tries` counts its runs. */
function statement(errors: Error[]) {
  const state = { tries: 0 };
  const run = async () => {
    const error = errors[state.tries++];
    if (error) throw error;
    return 'answer';
  };
  return { state, run };
}

describe('retryTransient', () => {
  it('runs again while the failure is transient, and answers', async () => {
    const { state, run } = statement([reset(), reset(), reset()]);
    await expect(retryTransient(run, { sleep: noSleep })).resolves.toBe('answer');
    expect(state.tries).toBe(4);
  });

  it('throws the last failure once the attempts are used up', async () => {
    const { state, run } = statement([reset(), reset(), reset()]);
    await expect(retryTransient(run, { attempts: 2, sleep: noSleep })).rejects.toMatchObject({
      code: 'ECONNRESET',
    });
    expect(state.tries).toBe(2);
  });

  it('throws a failure that is not transient at once, and when the caller has stopped', async () => {
    const bug = statement([new Error('bug')]);
    await expect(retryTransient(bug.run, { sleep: noSleep })).rejects.toThrow('bug');
    expect(bug.state.tries).toBe(1);
    const closing = statement([reset()]);
    await expect(retryTransient(closing.run, { sleep: noSleep, stopped: () => true })).rejects.toThrow(
      'reset',
    );
    expect(closing.state.tries).toBe(1);
  });

  it('starts no try once withinMs has passed since the first failure', async () => {
    const { state, run } = statement(Array.from({ length: 1000 }, reset));
    const started = Date.now();
    await expect(retryTransient(run, { withinMs: 200 })).rejects.toThrow('reset');
    expect(Date.now() - started).toBeGreaterThanOrEqual(200);
    expect(state.tries).toBeGreaterThan(1);
  });
});
