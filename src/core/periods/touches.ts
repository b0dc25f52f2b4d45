/**
 * What a rollup's marking owes each period its upstream's events (or, for a rollup new to the
 * upstream, its merged segments) touch, walked newest first within a budget so that one wide span
 * is marked over several passes (scheduler/touch.ts writes the marks). Pure: no I/O.
 */

import type { Rollup } from '../rollups/rollup.js';
import type { Interval } from '../types.js';
import type { Period } from './calendar.js';
import { walkDown } from './walk-down.js';

/** An event of the log, as marking reads it. */
export interface LoggedEvent {
  seq: number;
  kind: 'completion' | 'replay_requirement';
  lo: number;
  hi: number;
  ingested_at: Date;
}

/** What the events of a batch owe one period they touch. */
export interface Touch {
  hi: number;
  key: string;
  /** When the first event touching it arrived: a period first touched after its deadline was already missed. */
  firstAt: Date;
  lastChangeAt: Date | null;
  completionSeq: number;
  replaySeq: number;
}

/** Where a walk stands on one upstream: the log position and where it stopped inside an event or a seed. */
export interface WalkPosition {
  seq: number;
  eventBelow: number | null;
  seedBelow: number | null;
  moved: boolean;
}

/**
 * The periods of `events` (one upstream's, in log order) into `touches`, each event's newest
 * first, while the walk's budget lasts; moves `at` past each event all of whose periods are in,
 * and to where it stopped inside the next one. True when every event read is in.
 */
export function touchEvents(
  rollup: Rollup,
  events: readonly LoggedEvent[],
  at: WalkPosition,
  touches: Map<number, Touch>,
  walk: { left: number },
): boolean {
  for (const e of events) {
    // The event after the cursor may be half marked already: its periods from eventBelow up.
    const top = at.eventBelow ?? e.hi;
    const { periods, below } = walkDown(rollup.calendar, Math.max(e.lo, rollup.begin), top, walk.left);
    walk.left -= periods.length;
    for (const p of periods) touch(touches, p, e);
    at.moved = true;
    if (below !== null) {
      at.eventBelow = below;
      return false;
    }
    at.seq = e.seq;
    at.eventBelow = null;
  }
  return true;
}

/**
 * A seed's periods into `touches`: those of the segments overlapping [begin, seedBelow), newest
 * first (`spans`, newest first; `full`: there may be older ones than these), while the walk's
 * budget lasts. No rerun is owed for them. Moves `at`'s seedBelow to where it stopped, null when
 * the seed is done.
 */
export function touchSeed(
  rollup: Rollup,
  spans: readonly Interval[],
  full: boolean,
  at: WalkPosition,
  touches: Map<number, Touch>,
  walk: { left: number },
  now: Date,
): void {
  let top = at.seedBelow!;
  let stopped = false;
  for (const s of spans) {
    const from = Math.max(s.start, rollup.begin);
    const { periods, below } = walkDown(rollup.calendar, from, Math.min(s.end, top), walk.left);
    walk.left -= periods.length;
    for (const p of periods) {
      if (!touches.has(p.start)) touches.set(p.start, seedTouch(p, now));
    }
    if (below !== null) {
      top = below;
      stopped = true;
      break;
    }
    // The oldest period walked starts at or before the span: the spans below it are older.
    if (periods.length > 0) top = periods.at(-1)!.start;
  }
  // Read a full page of spans: older ones than these may overlap [begin, top) still.
  at.seedBelow = (stopped || full) && top > rollup.begin ? top : null;
  at.moved = true;
}

function seedTouch(p: Period, now: Date): Touch {
  return { hi: p.end, key: p.key, firstAt: now, lastChangeAt: null, completionSeq: 0, replaySeq: 0 };
}

/** What event `e` owes period `p`, added to what earlier events of the batch owe it. */
function touch(touches: Map<number, Touch>, p: Period, e: LoggedEvent): void {
  const t = touches.get(p.start) ?? {
    hi: p.end,
    key: p.key,
    firstAt: e.ingested_at,
    lastChangeAt: null,
    completionSeq: 0,
    replaySeq: 0,
  };
  if (e.kind === 'completion') {
    t.completionSeq = Math.max(t.completionSeq, e.seq);
    if (!t.lastChangeAt || e.ingested_at > t.lastChangeAt) t.lastChangeAt = e.ingested_at;
  } else {
    t.replaySeq = Math.max(t.replaySeq, e.seq);
  }
  touches.set(p.start, t);
}
