import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { piecesOf } from '../../src/core/coverage.js';
import {
  type CandidatePeriod,
  followRequest,
  type HeldRequest,
  planRepairs,
  type RepairRange,
  type RepairState,
  rangesOfPieces,
  repairOwed,
  withoutHeld,
} from '../../src/core/repair.js';
import { parseRepairKey, repairKey, repairPayload } from '../../src/core/repair-payload.js';
import type { Interval, Segment } from '../../src/core/types.js';

/** The brute-force model: sets of integer points on a small grid, one at a time. */
const N = 48;
const points = (set: readonly Interval[]): Set<number> => {
  const out = new Set<number>();
  for (const i of set) for (let p = i.start; p < i.end; p++) out.add(p);
  return out;
};
/** A point's kind in a set of ranges ("missing", "replay_required@v"), or undefined. */
const kindAt = (ranges: readonly RepairRange[], p: number): string | undefined => {
  const r = ranges.find((x) => x.start <= p && p < x.end);
  return r === undefined
    ? undefined
    : r.kind === 'missing'
      ? 'missing'
      : `replay_required@${r.requiredVersion}`;
};
const pointKinds = (ranges: readonly RepairRange[]): Map<number, string> => {
  const out = new Map<number, string>();
  for (let p = 0; p < N; p++) {
    const k = kindAt(ranges, p);
    if (k !== undefined) out.set(p, k);
  }
  return out;
};

const arbInterval = fc
  .tuple(fc.integer({ min: 0, max: N }), fc.integer({ min: 0, max: N }))
  .map(([a, b]) => ({ start: Math.min(a, b), end: Math.max(a, b) }));

/** Disjoint segments (complete or replay_required at v1/v2) over the grid. */
const arbSegments: fc.Arbitrary<Segment[]> = fc
  .array(fc.constantFrom('gap', 'complete', 'rr1', 'rr2'), { minLength: N, maxLength: N })
  .map((states) => {
    const out: Segment[] = [];
    for (let p = 0; p < N; p++) {
      const s = states[p]!;
      if (s === 'gap') continue;
      const state = s === 'complete' ? 'complete' : 'replay_required';
      const requiredVersion = s === 'rr1' ? 'v1' : s === 'rr2' ? 'v2' : null;
      out.push({ start: p, end: p + 1, version: 'v0', state, requiredVersion });
    }
    return out;
  });

/** Disjoint, sorted ranges of random kinds. */
const arbRanges: fc.Arbitrary<RepairRange[]> = fc
  .array(fc.constantFrom(null, 'missing', 'v1', 'v2'), { minLength: N, maxLength: N })
  .map((kinds) => {
    const out: RepairRange[] = [];
    for (let p = 0; p < N; p++) {
      const k = kinds[p];
      if (k === null || k === undefined) continue;
      const kind = k === 'missing' ? 'missing' : 'replay_required';
      const requiredVersion = k === 'missing' ? null : k;
      const prev = out.at(-1);
      if (prev && prev.end === p && prev.kind === kind && prev.requiredVersion === requiredVersion)
        out[out.length - 1] = { ...prev, end: p + 1 };
      else out.push({ start: p, end: p + 1, kind, requiredVersion });
    }
    return out;
  });

describe('rangesOfPieces', () => {
  it('asks for exactly the points that are not complete, each with its kind and required version', () => {
    fc.assert(
      fc.property(arbSegments, arbInterval, (segments, window) => {
        const ranges = rangesOfPieces(piecesOf(window, segments));
        for (let p = 0; p < N; p++) {
          const seg = segments.find((s) => s.start <= p && p < s.end);
          const inWindow = window.start <= p && p < window.end;
          const want = !inWindow
            ? undefined
            : seg === undefined
              ? 'missing'
              : seg.state === 'complete'
                ? undefined
                : `replay_required@${seg.requiredVersion}`;
          expect(kindAt(ranges, p)).toBe(want);
        }
        // Maximal: no two neighbours of one kind stay apart.
        for (let i = 1; i < ranges.length; i++) {
          const [a, b] = [ranges[i - 1]!, ranges[i]!];
          expect(a.end <= b.start).toBe(true);
          if (a.end === b.start)
            expect(a.kind !== b.kind || a.requiredVersion !== b.requiredVersion).toBe(true);
        }
      }),
    );
  });
});

describe('withoutHeld', () => {
  it('keeps exactly the points no held span has, with their kinds', () => {
    fc.assert(
      fc.property(arbRanges, fc.array(arbInterval, { maxLength: 4 }), (ranges, held) => {
        const out = withoutHeld(ranges, held);
        const heldPoints = points(held);
        for (let p = 0; p < N; p++) {
          const want = heldPoints.has(p) ? undefined : kindAt(ranges, p);
          expect(kindAt(out, p)).toBe(want);
        }
      }),
    );
  });
});

describe('repairOwed', () => {
  const T = Date.parse('2026-06-01T12:00:00Z');
  it('is owed only to unsatisfied periods past `after` whose deadline has not passed', () => {
    const at = (
      endMs: number,
      state: 'waiting' | 'rerun_pending' | 'triggered' | 'settling' | 'missed',
      deadline?: number,
    ) => repairOwed({ afterMs: 30 * 60_000 }, deadline, { endMs, state }, T);
    expect(at(T - 30 * 60_000, 'waiting')).toBe(true);
    expect(at(T - 30 * 60_000 + 1, 'waiting')).toBe(false);
    expect(at(T - 3_600_000, 'rerun_pending')).toBe(true);
    for (const s of ['triggered', 'settling', 'missed'] as const) expect(at(T - 3_600_000, s)).toBe(false);
    expect(at(T - 3_600_000, 'waiting', 3_600_000)).toBe(false); // the deadline decides
    expect(at(T - 3_600_000, 'waiting', 3_600_001)).toBe(true);
  });
});

/** Periods of two calendars over the grid: rollup "a" of width 4, rollup "b" of width 12. */
const periodsOf = (rollupId: string, width: number) =>
  Array.from({ length: N / width }, (_, i) => ({
    rollupId,
    lo: i * width,
    hi: (i + 1) * width,
    key: `${rollupId}${i}`,
  }));
const ALL_PERIODS = [...periodsOf('a', 4), ...periodsOf('b', 12)];
const ASSETS = ['x', 'y'];

const arbScenario = fc.record({
  // Per asset, the index's not-complete points (with kinds).
  holes: fc.record({ x: arbRanges, y: arbRanges }),
  // Which periods are owed (the rest are satisfied or not yet due).
  owed: fc.array(fc.boolean(), { minLength: ALL_PERIODS.length, maxLength: ALL_PERIODS.length }),
  held: fc.array(
    fc.record({
      asset: fc.constantFrom(...ASSETS),
      span: fc.array(arbInterval, { maxLength: 2 }),
      active: fc.boolean(),
    }),
    { maxLength: 4 },
  ),
  budget: fc.integer({ min: 0, max: 12 }),
});

const candidatesOf = (s: { holes: Record<string, RepairRange[]>; owed: boolean[] }): CandidatePeriod[] =>
  ALL_PERIODS.flatMap((p, i) => {
    if (!s.owed[i]) return [];
    const ranges = new Map<string, RepairRange[]>();
    for (const asset of ASSETS) {
      const inside = withoutHeld(s.holes[asset]!, [
        { start: 0, end: p.lo },
        { start: p.hi, end: N },
      ]);
      if (inside.length > 0) ranges.set(asset, inside);
    }
    return ranges.size > 0 ? [{ ...p, ranges }] : [];
  });

/** The plan's own order: newest period first (larger end, then larger start, then rollup id). */
const order = (a: { hi: number; lo: number; rollupId: string }) => [-a.hi, -a.lo, a.rollupId] as const;
const before = (a: ReturnType<typeof order>, b: ReturnType<typeof order>) =>
  a[0] < b[0] || (a[0] === b[0] && (a[1] < b[1] || (a[1] === b[1] && a[2] < b[2])));

describe('planRepairs', () => {
  it('requests every owed point once, never a held one, newest period first within the budget', () => {
    fc.assert(
      fc.property(arbScenario, (s) => {
        const held: HeldRequest[] = s.held.map((h, i) => ({ id: 100 + i, ...h }));
        const candidates = candidatesOf(s);
        const plan = planRepairs(candidates, held, () => 1000, s.budget);
        expect(plan.made.length).toBeLessThanOrEqual(s.budget);
        const leftOut = new Set<string>();
        for (const asset of ASSETS) {
          const heldPoints = points(held.filter((h) => h.asset === asset).flatMap((h) => h.span));
          const madePoints = new Map<number, number>();
          plan.made.forEach((m, i) => {
            if (m.asset !== asset) return;
            const c = candidates.find((c) => c.rollupId === m.rollupId && c.lo === m.lo)!;
            for (const [p, kind] of pointKinds(m.ranges)) {
              // Owed by its own period, with the index's kind, never held, never asked twice.
              expect(kindAt(c.ranges.get(asset) ?? [], p)).toBe(kind);
              expect(heldPoints.has(p)).toBe(false);
              expect(madePoints.has(p)).toBe(false);
              madePoints.set(p, i);
            }
          });
          for (const c of candidates) {
            const owed = pointKinds(c.ranges.get(asset) ?? []);
            const uncovered = [...owed.keys()].filter((p) => !heldPoints.has(p) && !madePoints.has(p));
            if (uncovered.length === 0) continue;
            // Left out only by the budget, and only periods older than every one given a request.
            expect(plan.deferred).toBeGreaterThan(0);
            leftOut.add(c.rollupId);
            for (const m of plan.made) expect(before(order(m), order(c))).toBe(true);
          }
        }
        // Exactly the rollups with a period left out look again at once.
        expect([...plan.deferredRollups].sort()).toEqual([...leftOut].sort());
      }),
    );
  });

  it('makes each period wait on every open request over its ranges, and on the ones it makes', () => {
    fc.assert(
      fc.property(arbScenario, (s) => {
        const held: HeldRequest[] = s.held.map((h, i) => ({ id: 100 + i, ...h }));
        const candidates = candidatesOf(s);
        const plan = planRepairs(candidates, held, () => 1000, s.budget);
        const deferredPeriods = new Set(
          candidates
            .filter((c) => !plan.waiters.some((w) => w.rollupId === c.rollupId && w.lo === c.lo))
            .map((c) => `${c.rollupId}@${c.lo}`),
        );
        plan.made.forEach((m, i) => {
          expect(plan.waiters).toContainEqual({
            request: { made: i },
            rollupId: m.rollupId,
            lo: m.lo,
            key: m.key,
          });
        });
        for (const c of candidates) {
          if (deferredPeriods.has(`${c.rollupId}@${c.lo}`)) continue;
          for (const h of held) {
            const meets = [...pointKinds(c.ranges.get(h.asset) ?? []).keys()].some((p) =>
              points(h.span).has(p),
            );
            const waits = plan.waiters.some(
              (w) => 'id' in w.request && w.request.id === h.id && w.rollupId === c.rollupId && w.lo === c.lo,
            );
            expect(waits).toBe(meets && h.active);
          }
        }
      }),
    );
  });

  it('bounds each request to `limit` ranges and says how many there were', () => {
    fc.assert(
      fc.property(arbScenario, fc.integer({ min: 1, max: 3 }), (s, limit) => {
        const plan = planRepairs(candidatesOf(s), [], () => limit, 100);
        for (const m of plan.made) {
          expect(m.ranges.length).toBeLessThanOrEqual(limit);
          expect(m.rangesTotal).toBeGreaterThanOrEqual(m.ranges.length);
          expect(m.missingTotal).toBeGreaterThanOrEqual(m.ranges.reduce((n, r) => n + r.end - r.start, 0));
        }
      }),
    );
  });

  it('makes one request for a hole two rollups wait on', () => {
    const hole: RepairRange[] = [{ start: 2, end: 3, kind: 'missing', requiredVersion: null }];
    const plan = planRepairs(
      [
        { rollupId: 'hourly', lo: 0, hi: 4, key: 'h0', ranges: new Map([['x', hole]]) },
        { rollupId: 'daily', lo: 0, hi: 12, key: 'd0', ranges: new Map([['x', hole]]) },
      ],
      [],
      () => 100,
      100,
    );
    expect(plan.made).toHaveLength(1);
    expect(plan.waiters.map((w) => w.rollupId).sort()).toEqual(['daily', 'hourly']);
  });
});

describe('followRequest', () => {
  const arbStep = fc.record({
    advance: fc.integer({ min: 0, max: 3 }),
    // Points the producer fills (complete) at this step.
    fill: fc.array(arbInterval, { maxLength: 2 }),
    decided: fc.boolean(),
  });

  it('is repaired, cancelled, re-sent with what is left, or abandoned exactly as the point model says', () => {
    fc.assert(
      fc.property(
        arbRanges.filter((r) => r.length > 0),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 3 }),
        fc.array(arbStep, { maxLength: 12 }),
        (first, attempts, everyMs, steps) => {
          const complete = new Set<number>();
          let req = { state: 'open' as RepairState, ranges: first, attempt: 1, nextAt: everyMs };
          let model = { state: 'open' as RepairState, asked: pointKinds(first), attempt: 1, nextAt: everyMs };
          const originalSize = model.asked.size;
          let now = 0;
          for (const step of steps) {
            now += step.advance;
            for (const p of points(step.fill)) complete.add(p);
            // What the index says is left inside the current ranges.
            const remaining = withoutHeld(
              req.ranges,
              [...complete].map((p) => ({ start: p, end: p + 1 })),
            );
            const out = followRequest({ ...req, attempts, everyMs, unwaited: step.decided }, remaining, now);
            // The model, point by point.
            const left = new Map([...model.asked].filter(([p]) => !complete.has(p)));
            let want: { state: RepairState; resend: boolean };
            if (left.size === 0) want = { state: 'repaired', resend: false };
            else if (step.decided) want = { state: 'cancelled', resend: false };
            else if (now < model.nextAt) {
              const partial = model.state === 'partial' || left.size < model.asked.size;
              want = { state: partial ? 'partial' : 'open', resend: false };
            } else if (model.attempt >= attempts) want = { state: 'abandoned', resend: false };
            else {
              const partial = model.state === 'partial' || left.size < model.asked.size;
              want = { state: partial ? 'partial' : 'open', resend: true };
            }
            expect(out.state).toBe(want.state);
            if (out.kind === 'final') {
              expect(want.resend).toBe(false);
              return;
            }
            expect(out.resend).toBe(want.resend);
            if (out.resend) {
              // A new attempt carries exactly what is still not complete, kinds kept.
              expect(pointKinds(out.ranges)).toEqual(left);
              model = { state: want.state, asked: left, attempt: model.attempt + 1, nextAt: now + everyMs };
              req = {
                state: out.state,
                ranges: [...out.ranges],
                attempt: req.attempt + 1,
                nextAt: out.nextAt,
              };
            } else {
              expect(out.nextAt).toBe(req.nextAt);
              model = { ...model, state: want.state };
              req = { ...req, state: out.state };
            }
            expect(req.attempt).toBeLessThanOrEqual(attempts);
            expect(model.asked.size).toBeLessThanOrEqual(originalSize);
          }
        },
      ),
    );
  });
});

describe('keys and payload', () => {
  it('gives each attempt its own readable key without colons, and reads it back', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2 ** 40 }), fc.integer({ min: 1, max: 100 }), (id, attempt) => {
        const key = repairKey(id, attempt);
        expect(key).not.toContain(':');
        expect(parseRepairKey(key)).toEqual({ id, attempt });
      }),
    );
  });

  it('has the documented fields', () => {
    const payload = repairPayload({
      id: 7,
      attempt: 2,
      asset: 'warehouse.orders',
      ranges: [{ start: 0, end: 300_000_000, kind: 'missing', requiredVersion: null }],
      rangesTotal: 1,
      missingTotal: 300_000_000,
      rollup: 'orders_hourly',
      period: { start: '1970-01-01T00:00:00Z', end: '1970-01-01T01:00:00Z', key: '1970-01-01T00' },
      format: (p) => new Date(p / 1000).toISOString(),
      unitSeconds: 1e-6,
      requestedAt: new Date('2026-06-01T12:00:00Z'),
    });
    expect(Object.keys(payload).sort()).toEqual(
      [
        'asset',
        'attempt',
        'idempotency_key',
        'missing_total',
        'period',
        'ranges',
        'ranges_total',
        'requested_at',
        'rollup',
        'type',
      ].sort(),
    );
    expect(payload.type).toBe('repair');
    expect(payload.idempotency_key).toBe('repair-7~a2');
    expect(payload.ranges).toEqual([
      {
        start: '1970-01-01T00:00:00.000Z',
        end: '1970-01-01T00:05:00.000Z',
        kind: 'missing',
        required_version: null,
      },
    ]);
    expect(payload.missing_total).toBe(300);
  });
});
