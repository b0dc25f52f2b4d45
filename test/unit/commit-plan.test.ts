/**
 * The plan of a commit (core/commit-plan.ts) against a brute-force model that takes the batch one
 * event at a time: refused for another domain, a repeat of a key earlier in the batch, a key the
 * log already holds, or committed with the next seq; its change folded over the asset's history
 * and judged point by point, its counters summed as it goes.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type AssetCounters,
  type CommitOutcome,
  type LockedAsset,
  planAppend,
  planFold,
  touchedRanges,
} from '../../src/core/commit-plan.js';
import type { NormalizedEvent } from '../../src/core/events.js';
import { applyChanges } from '../../src/core/segments.js';
import type { Change, Domain, Interval, Segment } from '../../src/core/types.js';
import { modelAt } from '../helpers/coverage-model.js';

const SIZE = 30;
type Stored = Segment & { readonly id: number };

function eventOf(asset: string, domain: Domain, key: string, change: Change): NormalizedEvent {
  const bound = (value: number) => ({ domain, value, text: String(value) });
  return {
    kind: change.kind,
    asset,
    domain,
    zone: 'UTC',
    start: bound(change.start),
    end: bound(change.end),
    version: change.version,
    id: key,
    producedAt: null,
    extra: {},
    key,
  };
}

const changeArb: fc.Arbitrary<Change> = fc
  .record({
    kind: fc.constantFrom<Change['kind']>('completion', 'completion', 'replay_requirement'),
    a: fc.integer({ min: 0, max: SIZE }),
    b: fc.integer({ min: 0, max: SIZE }),
    version: fc.constantFrom('v1', 'v2', null),
  })
  .map(({ kind, a, b, version }) => ({ kind, start: Math.min(a, b), end: Math.max(a, b), version }));

const NAMES = ['a', 'b', 'c'] as const;
const KEYS = ['k0', 'k1', 'k2', 'k3', 'k4', 'k5'];

/** Per asset: its locked row, the keys its log holds and the history its segments were folded from. */
const assetArb = fc.record({
  domain: fc.constantFrom<Domain>('time', 'time', 'integer'),
  lastSeq: fc.integer({ min: 0, max: 1000 }),
  logged: fc.subarray(KEYS),
  history: fc.array(changeArb, { maxLength: 8 }),
});

const scenario = fc.record({
  assets: fc.tuple(assetArb, assetArb, assetArb),
  events: fc.array(
    fc.record({
      asset: fc.constantFrom(0, 1, 2),
      // Mostly the asset's own domain; sometimes the other one, which the index refuses.
      foreign: fc.constantFrom(false, false, false, true),
      key: fc.constantFrom(...KEYS),
      change: changeArb,
    }),
    { maxLength: 20 },
  ),
});

type Scenario = typeof scenario extends fc.Arbitrary<infer T> ? T : never;

function setUp(s: Scenario) {
  const locked = new Map<string, LockedAsset>(
    s.assets.map((a, i) => [
      NAMES[i]!,
      { id: 10 + i, name: NAMES[i]!, domain: a.domain, last_seq: a.lastSeq },
    ]),
  );
  const events = s.events.map((e) => {
    const held = s.assets[e.asset]!.domain;
    const domain: Domain = e.foreign ? (held === 'time' ? 'integer' : 'time') : held;
    return eventOf(NAMES[e.asset]!, domain, e.key, e.change);
  });
  let nextId = 1;
  const stored = new Map<number, Stored[]>(
    s.assets.map((a, i) => [
      10 + i,
      applyChanges([], a.history).insert.map((seg) => ({ ...seg, id: nextId++ })),
    ]),
  );
  return { locked, events, stored };
}

/** The model: the batch one event at a time. */
function model(s: Scenario, events: readonly NormalizedEvent[], locked: ReadonlyMap<string, LockedAsset>) {
  const outcomes: Array<CommitOutcome['status'] | { committed: number }> = [];
  const next = new Map<string, number>([...locked].map(([n, a]) => [n, a.last_seq]));
  const seen = new Map<string, Set<string>>(NAMES.map((n) => [n, new Set<string>()]));
  const history = new Map<string, Change[]>(NAMES.map((n, i) => [n, [...s.assets[i]!.history]]));
  const counters = new Map<
    string,
    { lastSeq: number; count: number; lo: number | null; hi: number | null }
  >();
  for (const e of events) {
    const asset = locked.get(e.asset)!;
    if (e.domain !== asset.domain) {
      outcomes.push('rejected');
      continue;
    }
    if (seen.get(e.asset)!.has(e.key)) {
      outcomes.push('duplicate');
      continue;
    }
    seen.get(e.asset)!.add(e.key);
    const seq = next.get(e.asset)! + 1;
    next.set(e.asset, seq);
    const logged = s.assets[NAMES.indexOf(e.asset as never)]!.logged;
    if (logged.includes(e.key)) {
      outcomes.push('duplicate');
      continue;
    }
    outcomes.push({ committed: seq });
    const c = counters.get(e.asset) ?? { lastSeq: 0, count: 0, lo: null, hi: null };
    counters.set(e.asset, c);
    c.lastSeq = Math.max(c.lastSeq, seq);
    c.count += 1;
    if (e.end.value > e.start.value) {
      history
        .get(e.asset)!
        .push({ kind: e.kind, start: e.start.value, end: e.end.value, version: e.version });
      if (e.kind === 'completion') {
        c.lo = c.lo === null ? e.start.value : Math.min(c.lo, e.start.value);
        c.hi = c.hi === null ? e.end.value : Math.max(c.hi, e.end.value);
      }
    }
  }
  return { outcomes, history, counters };
}

/** The log's answer to the append, as insertEvents gives it: the seq of each row whose key it lacked. */
function logAnswer(s: Scenario, plan: ReturnType<typeof planAppend<LockedAsset>>) {
  const inserted = new Map<number, Map<string, number>>();
  for (const p of plan.assets) {
    const logged = s.assets[p.asset.id - 10]!.logged;
    const taken = p.rows.filter((r) => !logged.includes(r.event.key));
    if (taken.length > 0) inserted.set(p.asset.id, new Map(taken.map((r) => [r.event.key, r.seq])));
  }
  return inserted;
}

/** What segmentsTouchingMany reads: stored segments overlapping or adjacent to any of the ranges. */
function touching(stored: ReadonlyMap<number, Stored[]>, requests: ReadonlyArray<[number, Interval[]]>) {
  const out = new Map<number, Stored[]>();
  for (const [id, ranges] of requests) {
    const hit = stored.get(id)!.filter((seg) => ranges.some((r) => seg.start <= r.end && r.start <= seg.end));
    if (hit.length > 0) out.set(id, hit);
  }
  return out;
}

const pointOf = (segments: readonly Segment[], p: number) => {
  const hits = segments.filter((s) => s.start <= p && p < s.end);
  expect(hits.length).toBeLessThanOrEqual(1);
  const s = hits[0];
  return s === undefined
    ? { state: 'gap', version: null, requiredVersion: null }
    : { state: s.state, version: s.version, requiredVersion: s.requiredVersion };
};

/** The commit as store/assets/commit.ts runs it, the log and the segment read simulated. */
function commit(s: Scenario) {
  const { locked, events, stored } = setUp(s);
  const plan = planAppend(events, locked);
  const read = touching(
    stored,
    plan.assets.map((p) => [p.asset.id, touchedRanges(p)]),
  );
  const fold = planFold(events, plan, logAnswer(s, plan), read);
  return { locked, events, stored, plan, read, fold, model: model(s, events, locked) };
}

describe('the commit plan', () => {
  it('gives every event the outcome and seq of the one-at-a-time model', () => {
    fc.assert(
      fc.property(scenario, (s) => {
        const { locked, events, plan, fold, model } = commit(s);
        const { outcomes } = fold;
        const expected = model.outcomes;
        expect(outcomes.length).toBe(events.length);
        outcomes.forEach((o, i) => {
          const want = expected[i]!;
          if (typeof want === 'object') {
            expect(o).toEqual({
              status: 'committed',
              assetId: locked.get(events[i]!.asset)!.id,
              seq: want.committed,
            });
          } else if (want === 'duplicate') {
            expect(o).toEqual({ status: 'duplicate', assetId: locked.get(events[i]!.asset)!.id });
          } else {
            expect(o.status).toBe('rejected');
            expect(o.status === 'rejected' && o.error.reason).toBe('domain_mismatch');
          }
        });
        expect(plan.refused.map((r) => r.index)).toEqual(
          expected.flatMap((o, i) => (o === 'rejected' ? [i] : [])),
        );
      }),
      { numRuns: 1000 },
    );
  });

  it('rewrites the segments it reads into what the model folds, point by point, and counts the change', () => {
    fc.assert(
      fc.property(scenario, (s) => {
        const { stored, read, fold, model } = commit(s);
        const { removeIds, insert, updates } = fold;
        const { history } = model;
        const gone = new Set(removeIds);
        for (const id of gone) expect([...read.values()].flat().some((seg) => seg.id === id)).toBe(true);
        for (const [i, name] of NAMES.entries()) {
          const id = 10 + i;
          const added = insert.filter((x) => x.assetId === id).map((x) => x.segment);
          const removed = stored.get(id)!.filter((seg) => gone.has(seg.id));
          const after = [...stored.get(id)!.filter((seg) => !gone.has(seg.id)), ...added];
          for (let p = -1; p <= SIZE; p++) expect(pointOf(after, p)).toEqual(modelAt(history.get(name)!, p));
          // Still an index: disjoint and merged, as a fold from nothing gives it.
          const sorted = [...after]
            .sort((x, y) => x.start - y.start)
            .map(({ start, end, version, state, requiredVersion }) => ({
              start,
              end,
              version,
              state,
              requiredVersion,
            }));
          const folded = applyChanges([], history.get(name)!).insert.sort((x, y) => x.start - y.start);
          expect(sorted).toEqual(folded);
          const update = updates.find((u) => u.id === id);
          expect(update?.delta ?? 0).toBe(added.length - removed.length);
        }
      }),
      { numRuns: 1000 },
    );
  });

  it("updates each asset the log took events for with the model's counters, in the order the batch names them", () => {
    fc.assert(
      fc.property(scenario, (s) => {
        const { locked, events, fold, model } = commit(s);
        const { updates } = fold;
        const { counters } = model;
        const order = [
          ...new Set(events.filter((e) => e.domain === locked.get(e.asset)!.domain).map((e) => e.asset)),
        ];
        const expected = order
          .filter((name) => counters.has(name))
          .map((name) => ({ id: locked.get(name)!.id, name, ...counters.get(name)! }));
        expect(updates.map(({ delta: _, ...u }) => u)).toEqual(expected);
      }),
      { numRuns: 1000 },
    );
  });

  it('commits a key once per batch, and a key already logged leaves its seq unused', () => {
    const locked = new Map<string, LockedAsset>([
      ['a', { id: 1, name: 'a', domain: 'integer', last_seq: 7 }],
    ]);
    const c = (start: number, end: number): Change => ({ kind: 'completion', start, end, version: 'v1' });
    const events = [
      eventOf('a', 'integer', 'k1', c(0, 5)),
      eventOf('a', 'integer', 'old', c(5, 9)),
      eventOf('a', 'integer', 'k1', c(0, 5)),
      eventOf('a', 'integer', 'k2', c(9, 12)),
      eventOf('a', 'time', 'k3', c(0, 1)),
    ];
    const plan = planAppend(events, locked);
    expect(plan.assets[0]!.rows.map((r) => [r.event.key, r.seq])).toEqual([
      ['k1', 8],
      ['old', 9],
      ['k2', 10],
    ]);
    const inserted = new Map([
      [
        1,
        new Map([
          ['k1', 8],
          ['k2', 10],
        ]),
      ],
    ]);
    const fold = planFold(events, plan, inserted, new Map());
    expect(fold.outcomes.map((o) => (o.status === 'committed' ? o.seq : o.status))).toEqual([
      8,
      'duplicate',
      'duplicate',
      10,
      'rejected',
    ]);
    const updates: AssetCounters[] = [{ id: 1, name: 'a', lastSeq: 10, count: 2, delta: 2, lo: 0, hi: 12 }];
    expect(fold.updates).toEqual(updates);
    expect(fold.insert.map((x) => [x.segment.start, x.segment.end])).toEqual([
      [0, 5],
      [9, 12],
    ]);
  });
});
