/**
 * Repair requests: the rules that ask a producer for exactly the ranges holding a
 * period back, and follow each request by what the index then covers. Pure: the index's pieces,
 * the requests already held and "now" (epoch ms) are handed in; the store only loads and saves.
 *
 * - owed: a period not satisfied (`waiting` or `rerun_pending`) `after` its end, whose deadline
 *   has not passed (a deadline decides as before), owes, per upstream, its not-complete ranges;
 * - merged: ranges already held by a request on the asset (open, partial, or abandoned: given up
 *   for good) are never requested again; the period waits on the open requests it overlaps;
 * - followed: `repaired` once the index covers every range; `cancelled` once every period waiting
 *   on it was decided otherwise; re-sent at `every` with a new attempt and only what is still not
 *   complete (`partial` once something it asked for was covered); `abandoned` when attempt
 *   `attempts` is due to be re-sent and is still not covered.
 */
import { intersect, measure, normalize } from './intervals.js';
import type { PeriodState } from './policy.js';
import type { Interval, Piece } from './types.js';

export const REPAIR_STATES = ['open', 'partial', 'repaired', 'abandoned', 'cancelled'] as const;
export type RepairState = (typeof REPAIR_STATES)[number];
/** The states in which a request is still followed (and re-sent). */
export const ACTIVE_REPAIR_STATES: readonly RepairState[] = ['open', 'partial'];

export type RepairKind = 'missing' | 'replay_required';

/** One range asked for: a gap (`missing`) or data to rebuild at `requiredVersion`. */
export interface RepairRange extends Interval {
  readonly kind: RepairKind;
  readonly requiredVersion: string | null;
}

export interface RepairPolicy {
  /** How long after a period's end it must be unsatisfied before its ranges are requested. */
  readonly afterMs: number;
  /** How long an attempt is given before the rest is requested again. */
  readonly everyMs: number;
  /** Attempts before the request is abandoned. */
  readonly attempts: number;
  /** At most this many ranges per request (the payload carries the totals). */
  readonly limit: number;
}

export const DEFAULT_REPAIR_POLICY: Omit<RepairPolicy, 'limit'> & { limit: number } = {
  afterMs: 30 * 60_000,
  everyMs: 3_600_000,
  attempts: 5,
  limit: 100,
};

/** The not-complete pieces of a tiling (core/coverage.ts piecesOf) as repair ranges. */
export function rangesOfPieces(pieces: readonly Piece[]): RepairRange[] {
  const out: RepairRange[] = [];
  for (const p of pieces) {
    if (p.state === 'complete' || p.end <= p.start) continue;
    const kind: RepairKind = p.state === 'gap' ? 'missing' : 'replay_required';
    const requiredVersion = kind === 'missing' ? null : p.requiredVersion;
    const prev = out.at(-1);
    if (prev && prev.end === p.start && prev.kind === kind && prev.requiredVersion === requiredVersion) {
      out[out.length - 1] = { ...prev, end: p.end };
    } else out.push({ start: p.start, end: p.end, kind, requiredVersion });
  }
  return out;
}

/** `ranges` without the points of `held`, each piece keeping its kind and version; ascending. */
export function withoutHeld(ranges: readonly RepairRange[], held: readonly Interval[]): RepairRange[] {
  const heldSet = normalize(held);
  const out: RepairRange[] = [];
  const sorted = [...ranges].sort((a, b) => a.start - b.start);
  for (const r of sorted) {
    const rest = intersect([r], complementWithin(r, heldSet));
    for (const piece of rest) out.push({ ...piece, kind: r.kind, requiredVersion: r.requiredVersion });
  }
  return out;
}

function complementWithin(window: Interval, set: readonly Interval[]): Interval[] {
  const out: Interval[] = [];
  let cursor = window.start;
  for (const s of set) {
    if (s.end <= cursor) continue;
    if (s.start >= window.end) break;
    if (s.start > cursor) out.push({ start: cursor, end: s.start });
    cursor = Math.max(cursor, s.end);
  }
  if (cursor < window.end) out.push({ start: cursor, end: window.end });
  return out;
}

/** Is this period owed repair requests now? (Before looking at its upstreams' ranges.) */
export function repairOwed(
  policy: { readonly afterMs: number },
  deadlineMs: number | undefined,
  period: { readonly endMs: number; readonly state: PeriodState },
  nowMs: number,
): boolean {
  if (period.state !== 'waiting' && period.state !== 'rerun_pending') return false;
  if (period.endMs + policy.afterMs > nowMs) return false;
  // The deadline, if it has passed, decides the period as it always did: nothing to request.
  return deadlineMs === undefined || period.endMs + deadlineMs > nowMs;
}

/** A period considered for requests, with each upstream's not-complete ranges inside it. */
export interface CandidatePeriod {
  readonly rollupId: string;
  readonly lo: number;
  readonly hi: number;
  readonly key: string;
  /** Not-complete ranges per upstream asset, inside [lo, hi). */
  readonly ranges: ReadonlyMap<string, readonly RepairRange[]>;
}

/** A request already stored on an asset: what it asked for at first (`span`), and whether it is open. */
export interface HeldRequest {
  readonly id: number;
  readonly asset: string;
  readonly span: readonly Interval[];
  readonly active: boolean;
}

export interface NewRequest {
  readonly asset: string;
  readonly rollupId: string;
  readonly lo: number;
  readonly hi: number;
  readonly key: string;
  /** At most `limit` ranges, oldest first. */
  readonly ranges: RepairRange[];
  /** Every range the period owed of this asset, and their measure, before the limit. */
  readonly rangesTotal: number;
  readonly missingTotal: number;
}

/** A period waiting on a request: a stored one (`id`) or one made by this plan (`made`, an index). */
export interface Waiter {
  readonly request: { readonly id: number } | { readonly made: number };
  readonly rollupId: string;
  readonly lo: number;
  readonly key: string;
}

export interface RepairPlan {
  readonly made: NewRequest[];
  readonly waiters: Waiter[];
  /** Periods left for a later pass because the budget ran out. */
  readonly deferred: number;
  /** The rollups those periods are of: only they need to look again at once. */
  readonly deferredRollups: ReadonlySet<string>;
}

/**
 * New requests for owed periods, newest period first, at most `budget` of them: per (period,
 * upstream) the not-complete ranges not held by any request on that asset (requests this plan
 * makes included, so two rollups waiting on one hole make one request). A period joins every open
 * request whose span meets its ranges. Candidates must already be owed (`repairOwed`).
 */
export function planRepairs(
  candidates: readonly CandidatePeriod[],
  held: readonly HeldRequest[],
  limitOf: (rollupId: string) => number,
  budget: number,
): RepairPlan {
  const byAsset = new Map<string, Array<{ ref: Waiter['request']; span: Interval[]; active: boolean }>>();
  for (const h of held) {
    const list = byAsset.get(h.asset) ?? [];
    list.push({ ref: { id: h.id }, span: normalize(h.span), active: h.active });
    byAsset.set(h.asset, list);
  }
  const order = [...candidates].sort(
    (a, b) => b.hi - a.hi || b.lo - a.lo || (a.rollupId < b.rollupId ? -1 : a.rollupId > b.rollupId ? 1 : 0),
  );
  const made: NewRequest[] = [];
  const waiters: Waiter[] = [];
  let deferred = 0;
  const deferredRollups = new Set<string>();
  let full = false;
  for (const period of order) {
    const assets = [...period.ranges.keys()].sort();
    let wantsNew = 0;
    for (const asset of assets) {
      const heldHere = byAsset.get(asset) ?? [];
      const rest = withoutHeld(
        period.ranges.get(asset)!,
        heldHere.flatMap((h) => h.span),
      );
      if (rest.length > 0) wantsNew++;
    }
    // Newest first: once a period does not fit, no older one is given a request in this plan.
    if (wantsNew > 0 && (full || made.length + wantsNew > budget)) {
      full = true;
      deferred++;
      deferredRollups.add(period.rollupId);
      continue;
    }
    for (const asset of assets) {
      const ranges = period.ranges.get(asset)!;
      if (ranges.length === 0) continue;
      const heldHere = byAsset.get(asset) ?? [];
      for (const h of heldHere) {
        if (h.active && intersect(h.span, ranges).length > 0)
          waiters.push({ request: h.ref, rollupId: period.rollupId, lo: period.lo, key: period.key });
      }
      const rest = withoutHeld(
        ranges,
        heldHere.flatMap((h) => h.span),
      );
      if (rest.length === 0) continue;
      const limit = Math.max(1, limitOf(period.rollupId));
      const request: NewRequest = {
        asset,
        rollupId: period.rollupId,
        lo: period.lo,
        hi: period.hi,
        key: period.key,
        ranges: rest.slice(0, limit),
        rangesTotal: rest.length,
        missingTotal: measure(rest),
      };
      const ref = { made: made.length };
      made.push(request);
      waiters.push({ request: ref, rollupId: period.rollupId, lo: period.lo, key: period.key });
      heldHere.push({ ref, span: normalize(request.ranges), active: true });
      byAsset.set(asset, heldHere);
    }
  }
  return { made, waiters, deferred, deferredRollups };
}

/** What following a request knows: its own record and what is left of its ranges now. */
export interface RequestFacts {
  readonly state: RepairState;
  /** The ranges its current attempt asked for. */
  readonly ranges: readonly RepairRange[];
  readonly attempt: number;
  readonly attempts: number;
  readonly everyMs: number;
  /** When the next attempt (or the abandonment) is due. */
  readonly nextAt: number;
  /** A request some rollup's periods waited on, and none waits any more (each decided otherwise). */
  readonly unwaited: boolean;
}

export type FollowStep =
  | { readonly kind: 'final'; readonly state: 'repaired' | 'abandoned' | 'cancelled' }
  /** Still followed; `resend`: make attempt + 1 now with `ranges`, due again at `nextAt`. */
  | {
      readonly kind: 'active';
      readonly state: 'open' | 'partial';
      readonly resend: boolean;
      readonly ranges: readonly RepairRange[];
      readonly nextAt: number;
    };

/**
 * One look at an active request, `remaining` being the not-complete ranges of the index inside its
 * current ranges (learnt from the index, never from the producer). Repaired wins over everything:
 * once covered, a request is repaired even if its periods were decided meanwhile.
 */
export function followRequest(
  req: RequestFacts,
  remaining: readonly RepairRange[],
  nowMs: number,
): FollowStep {
  const asked = normalize(req.ranges);
  const leftInside = remaining.flatMap((r) =>
    intersect([r], asked).map((i) => ({ ...i, kind: r.kind, requiredVersion: r.requiredVersion })),
  );
  if (leftInside.length === 0) return { kind: 'final', state: 'repaired' };
  if (req.unwaited) return { kind: 'final', state: 'cancelled' };
  const partial = req.state === 'partial' || measure(leftInside) < measure(asked);
  const state = partial ? 'partial' : 'open';
  if (nowMs < req.nextAt)
    return { kind: 'active', state, resend: false, ranges: req.ranges, nextAt: req.nextAt };
  if (req.attempt >= req.attempts) return { kind: 'final', state: 'abandoned' };
  return { kind: 'active', state, resend: true, ranges: leftInside, nextAt: nowMs + req.everyMs };
}

/**
 * A request made by hand (`coverage-rollup repair`): the not-complete ranges of the window that no
 * open request already asks for, at most `limit` of them. An abandoned request does not hold its
 * range here: asking by hand is asking again. Null when there is nothing left to ask for.
 */
export function manualRequest(
  owed: readonly RepairRange[],
  openSpans: readonly Interval[],
  limit: number,
): { ranges: RepairRange[]; rangesTotal: number; missingTotal: number } | null {
  const rest = withoutHeld(owed, openSpans);
  if (rest.length === 0) return null;
  return { ranges: rest.slice(0, Math.max(1, limit)), rangesTotal: rest.length, missingTotal: measure(rest) };
}
