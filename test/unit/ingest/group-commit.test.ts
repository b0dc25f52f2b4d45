import { describe, expect, it } from 'vitest';
import { GroupCommitter } from '../../../src/ingest/group-commit.js';
import { Hold } from '../../../src/ingest/hold.js';
import { waitFor } from '../../helpers/wait.js';

/** A commit function whose calls stay open until the test settles them. */
function controlledCommit() {
  const calls: Array<{ items: number[]; resolve: () => void; reject: (e: unknown) => void }> = [];
  const commit = (items: number[]) =>
    new Promise<string[]>((resolve, reject) => {
      calls.push({ items, resolve: () => resolve(items.map((i) => `ok ${i}`)), reject });
    });
  return { calls, commit };
}

const transient = Object.assign(new Error('connection lost'), { code: 'ECONNRESET' });

function committer(commit: (items: number[]) => Promise<string[]>) {
  return new GroupCommitter<number, string>({
    commit,
    isTransient: (e) => e === transient,
    maxBatch: 10,
    maxWaitMs: 1,
    maxInFlight: 1,
  });
}

describe('GroupCommitter withdrawal', () => {
  it('a withdrawn pending item leaves the batch and its caller stops waiting', async () => {
    const { calls, commit } = controlledCommit();
    const c = committer(commit);
    const first = c.add(1);
    await waitFor(() => calls.length === 1);
    const gone = new Hold();
    const kept = c.add(2);
    const withdrawn = c.add(3, gone);
    gone.release(new Error('given back'));
    await expect(withdrawn).rejects.toThrow('given back');
    calls[0]!.resolve();
    expect(await first).toBe('ok 1');
    await waitFor(() => calls.length === 2);
    expect(calls[1]!.items).toEqual([2]);
    calls[1]!.resolve();
    expect(await kept).toBe('ok 2');
  });

  it('a stuck batch whose items are all withdrawn frees its slot and no longer counts as stuck', async () => {
    const { calls, commit } = controlledCommit();
    const c = committer(commit);
    const hold = new Hold();
    const stuck = c.add(1, hold);
    await waitFor(() => calls.length === 1);
    await waitFor(() => c.oldestCommitMs() > 5);
    const beforeNext = performance.now();
    expect(c.oldestCommitMs(beforeNext)).toBeGreaterThan(5);
    const next = c.add(2);
    hold.release(new Error('given back'));
    await expect(stuck).rejects.toThrow('given back');
    await waitFor(() => calls.length === 2);
    expect(calls[1]!.items).toEqual([2]);
    // Only the attempt for a caller still waiting counts, and that one started after beforeNext.
    expect(c.oldestCommitMs(beforeNext)).toBe(0);
    calls[1]!.resolve();
    expect(await next).toBe('ok 2');
    calls[0]!.resolve(); // the late commit of the abandoned batch settles nobody
    await c.drain();
    expect(c.size).toBe(0);
  });

  it('a retry leaves the withdrawn items out', async () => {
    const { calls, commit } = controlledCommit();
    const c = committer(commit);
    const hold = new Hold();
    const gone = c.add(1, hold);
    const kept = c.add(2);
    await waitFor(() => calls.length === 1);
    expect(calls[0]!.items).toEqual([1, 2]);
    hold.release(new Error('given back'));
    await expect(gone).rejects.toThrow('given back');
    calls[0]!.reject(transient);
    await waitFor(() => calls.length === 2, { timeout: 5000 });
    expect(calls[1]!.items).toEqual([2]);
    calls[1]!.resolve();
    expect(await kept).toBe('ok 2');
  });

  it('a batch failing and retried counts as committing since its first attempt', async () => {
    const { calls, commit } = controlledCommit();
    const c = committer(commit);
    const kept = c.add(1);
    await waitFor(() => calls.length === 1);
    const firstAttempt = performance.now();
    calls[0]!.reject(transient);
    await waitFor(() => calls.length === 2, { timeout: 5000 });
    // Counted from before the first attempt, not from the retry's start.
    const now = performance.now();
    expect(c.oldestCommitMs(now)).toBeGreaterThanOrEqual(now - firstAttempt);
    calls[1]!.resolve();
    expect(await kept).toBe('ok 1');
    await waitFor(() => c.oldestCommitMs() === 0);
  });
});

describe('GroupCommitter for callers that answer requests (maxWaitMs 0, bounded attempts)', () => {
  const answering = (commit: (items: number[]) => Promise<string[]>) =>
    new GroupCommitter<number, string>({
      commit,
      isTransient: (e) => e === transient,
      maxBatch: 10,
      maxWaitMs: 0,
      maxInFlight: 1,
      attempts: 3,
    });

  it('items added in one turn of the event loop share a commit; those added during it share the next', async () => {
    const { calls, commit } = controlledCommit();
    const c = answering(commit);
    const first = [c.add(1), c.add(2), c.add(3)];
    await waitFor(() => calls.length === 1);
    expect(calls[0]!.items).toEqual([1, 2, 3]);
    const next = [c.add(4), c.add(5)];
    calls[0]!.resolve();
    expect(await Promise.all(first)).toEqual(['ok 1', 'ok 2', 'ok 3']);
    await waitFor(() => calls.length === 2);
    expect(calls[1]!.items).toEqual([4, 5]);
    calls[1]!.resolve();
    expect(await Promise.all(next)).toEqual(['ok 4', 'ok 5']);
  });

  it('a lone item is flushed at once, without a timer', async () => {
    const { calls, commit } = controlledCommit();
    const c = answering(commit);
    const lone = c.add(7);
    await new Promise((resolve) => setImmediate(resolve));
    expect(calls.map((call) => call.items)).toEqual([[7]]);
    calls[0]!.resolve();
    expect(await lone).toBe('ok 7');
  });

  it('after `attempts` transient failures every caller of the batch gets the error', async () => {
    const { calls, commit } = controlledCommit();
    const c = answering(commit);
    const all = [c.add(1), c.add(2)].map((p) => p.catch((e: unknown) => e));
    for (let attempt = 0; attempt < 3; attempt++) {
      await waitFor(() => calls.length === attempt + 1, { timeout: 5000 });
      calls[attempt]!.reject(transient);
    }
    expect(await Promise.all(all)).toEqual([transient, transient]);
    expect(calls).toHaveLength(3);
    expect(c.size).toBe(0);
  });

  it('a commit failing for good fails every caller, each alone once split', async () => {
    const c = answering(async () => {
      throw new Error('disk full');
    });
    const all = await Promise.all([c.add(1), c.add(2), c.add(3)].map((p) => p.catch((e: unknown) => e)));
    expect(all.map((e) => (e as Error).message)).toEqual(['disk full', 'disk full', 'disk full']);
  });
});
