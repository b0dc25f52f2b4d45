/**
 * Which open repair requests a scheduler pass looks at (scheduler/repair-follow.ts FollowWatch):
 * only what the passes learnt (due, assets named by commit notifications, decided periods), every
 * one of them on a new lease, when a notification named no assets, and every 5 minutes.
 */
import { describe, expect, it } from 'vitest';
import { FollowWatch } from '../../../src/scheduler/repair-follow.js';

const T = 1_000_000;
const later = (ms: number) => new Date(T + ms);

/** A watch past its first (full) look, as after the first pass of a lease. */
function settled(): FollowWatch {
  const w = new FollowWatch();
  expect(w.take(T, true, null)).toEqual({ kind: 'all' });
  return w;
}

describe('FollowWatch', () => {
  it('looks at every request first, then at nothing until something is learnt', () => {
    const w = settled();
    expect(w.take(T + 10, true, later(300_000))).toBeNull();
    expect(w.nextFullAt()).toBe(T + 300_000);
  });

  it('names the assets of commit notifications, the decided periods and whether any is due', () => {
    const w = settled();
    w.note(['a', 'b']);
    w.note(['b']);
    w.noteDecided('r', 7, 'triggered');
    w.noteDecided('r', 8, 'waiting'); // not decided otherwise: still waits
    w.noteDecided('q', 9, 'missed');
    expect(w.take(T + 10, true, later(5))).toEqual({
      kind: 'some',
      due: true,
      assets: ['a', 'b'],
      periods: [
        { rollupId: 'r', lo: 7 },
        { rollupId: 'q', lo: 9 },
      ],
    });
    // Taken: forgotten.
    expect(w.take(T + 20, true, later(300_000))).toBeNull();
  });

  it('looks at everything when a notification names no assets, after a reconnect, and every 5 minutes', () => {
    const w = settled();
    w.note('any');
    expect(w.take(T + 10, true, null)).toEqual({ kind: 'all' });
    w.all();
    expect(w.take(T + 20, true, null)).toEqual({ kind: 'all' });
    expect(w.take(T + 30, true, null)).toBeNull();
    expect(w.take(T + 20 + 300_000, true, null)).toEqual({ kind: 'all' });
  });

  it('puts back what a full batch left, and looks at nothing while no request is open', () => {
    const w = settled();
    w.note(['a']);
    const focus = w.take(T + 10, true, null)!;
    w.putBack(focus);
    expect(w.take(T + 20, true, null)).toEqual({ kind: 'some', due: false, assets: ['a'], periods: [] });
    w.note(['b']);
    expect(w.take(T + 30, false, null)).toBeNull();
    expect(w.nextFullAt()).toBe(Number.POSITIVE_INFINITY); // nothing open: no periodic wake
    w.putBack({ kind: 'all' });
    expect(w.take(T + 40, true, null)).toEqual({ kind: 'all' });
  });

  it('a standby that notes many assets without following falls back to one full look', () => {
    const w = settled();
    for (let i = 0; i < 6000; i++) w.note([`a${i}`]);
    expect(w.take(T + 10, true, null)).toEqual({ kind: 'all' });
  });
});
