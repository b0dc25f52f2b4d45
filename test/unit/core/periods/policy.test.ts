import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decide,
  type PeriodFacts,
  type Policy,
  satisfaction,
  type UpstreamFacts,
} from '../../../../src/core/periods/policy.js';

// Realistic measures: an hour in microseconds, as the evaluator hands them over.
const HOUR = 3600e6;
const T = Date.parse('2025-06-01T11:00:00Z');
const SEC = 1000;

/** An upstream of one hour of which `complete` µs are complete. */
const up = (complete: number, width = HOUR): UpstreamFacts => ({
  ratio: complete / width,
  notComplete: width - complete,
  replayRequired: 0,
});

const policy = (p: Partial<Policy> = {}): Policy => ({ settleMs: 0, onDeadline: 'trigger', ...p });

const facts = (f: Partial<PeriodFacts> = {}): PeriodFacts => ({
  state: 'waiting',
  generation: 0,
  satisfiedSince: null,
  lastChangeAt: null,
  rerun: null,
  manual: false,
  endMs: null,
  ...f,
});

describe('satisfaction', () => {
  it('is full only when every upstream is completely covered', () => {
    expect(satisfaction(policy(), [up(HOUR)])).toBe('full');
    expect(satisfaction(policy(), [up(HOUR), up(HOUR)])).toBe('full');
    expect(satisfaction(policy(), [up(HOUR), up(HOUR - 1)])).toBe('no');
    expect(satisfaction(policy({ ratio: 0.5 }), [up(HOUR), up(HOUR - 1)])).toBe('partial');
    // No upstream facts at all is never "full".
    expect(satisfaction(policy(), [])).toBe('no');
  });

  it('without ratio or max_missing, anything short of full coverage is not enough', () => {
    expect(satisfaction(policy(), [up(HOUR - 1)])).toBe('no');
    // replay_required counts as not complete even when the gaps are closed.
    expect(satisfaction(policy(), [{ ratio: 0.99, notComplete: 0.01 * HOUR, replayRequired: 0 }])).toBe('no');
  });

  it('ratio exactly at the threshold satisfies, one microsecond below does not (3528e6 of 3600e6 µs, r = 0.98)', () => {
    const p = policy({ ratio: 0.98 });
    expect(satisfaction(p, [up(3528e6)])).toBe('partial');
    expect(satisfaction(p, [up(3528e6 - 1)])).toBe('no');
    // Other exact thresholds: the correctly rounded quotient equals the literal.
    expect(satisfaction(policy({ ratio: 0.7 }), [up(2520e6)])).toBe('partial');
    expect(satisfaction(policy({ ratio: 0.7 }), [up(2520e6 - 1)])).toBe('no');
    expect(satisfaction(policy({ ratio: 0.999 }), [up(3596.4e6)])).toBe('partial');
    expect(satisfaction(policy({ ratio: 0.999 }), [up(3596.4e6 - 1)])).toBe('no');
    expect(satisfaction(policy({ ratio: 1 }), [up(HOUR - 1)])).toBe('no');
  });

  it('max_missing: exactly the allowance satisfies, one unit more does not', () => {
    const p = policy({ maxMissing: 72e6 }); // 72 s in µs: 2 % of an hour
    expect(satisfaction(p, [up(HOUR - 72e6)])).toBe('partial');
    expect(satisfaction(p, [up(HOUR - 72e6 - 1)])).toBe('no');
    // Integer domain: the allowance is in offsets.
    expect(satisfaction(policy({ maxMissing: 10 }), [up(990, 1000)])).toBe('partial');
    expect(satisfaction(policy({ maxMissing: 10 }), [up(989, 1000)])).toBe('no');
    expect(satisfaction(policy({ maxMissing: 0 }), [up(999, 1000)])).toBe('no');
  });

  it('ratio and max_missing together must both hold, for every upstream', () => {
    const p = policy({ ratio: 0.98, maxMissing: 36e6 });
    expect(satisfaction(p, [up(HOUR - 36e6)])).toBe('partial');
    expect(satisfaction(p, [up(3528e6)])).toBe('no'); // ratio ok, 72 s missing > 36 s
    const q = policy({ ratio: 0.98 });
    expect(satisfaction(q, [up(HOUR), up(3528e6)])).toBe('partial');
    expect(satisfaction(q, [up(HOUR), up(3528e6 - 1)])).toBe('no');
  });
});

describe('decide', () => {
  it('triggers a fully covered period as "covered" and a threshold one as "ratio"', () => {
    expect(decide(policy(), facts(), [up(HOUR)], T)).toEqual({ kind: 'trigger', reason: 'covered' });
    expect(decide(policy({ ratio: 0.98 }), facts(), [up(3528e6)], T)).toEqual({
      kind: 'trigger',
      reason: 'ratio',
    });
    expect(decide(policy({ ratio: 0.98 }), facts(), [up(3528e6 - 1)], T)).toEqual({
      kind: 'wait',
      state: 'waiting',
      satisfiedSince: null,
      dueAt: null,
    });
    expect(decide(policy({ maxMissing: 72e6 }), facts(), [up(HOUR - 72e6)], T)).toEqual({
      kind: 'trigger',
      reason: 'ratio',
    });
    expect(decide(policy({ maxMissing: 72e6 }), facts(), [up(HOUR - 72e6 - 1)], T)).toMatchObject({
      kind: 'wait',
      state: 'waiting',
    });
  });

  it('waits `settle` after the period is first seen satisfied', () => {
    const p = policy({ settleMs: 60 * SEC });
    const first = decide(p, facts({ lastChangeAt: T - 5 * SEC }), [up(HOUR)], T);
    expect(first).toEqual({ kind: 'wait', state: 'settling', satisfiedSince: T, dueAt: T + 60 * SEC });
    const settling = facts({ state: 'settling', satisfiedSince: T, lastChangeAt: T - 5 * SEC });
    expect(decide(p, settling, [up(HOUR)], T + 60 * SEC - 1)).toMatchObject({
      kind: 'wait',
      dueAt: T + 60 * SEC,
    });
    expect(decide(p, settling, [up(HOUR)], T + 60 * SEC)).toEqual({ kind: 'trigger', reason: 'covered' });
  });

  it('a newer change restarts settle', () => {
    const p = policy({ settleMs: 60 * SEC });
    const restarted = facts({ state: 'settling', satisfiedSince: T, lastChangeAt: T + 30 * SEC });
    expect(decide(p, restarted, [up(HOUR)], T + 60 * SEC)).toEqual({
      kind: 'wait',
      state: 'settling',
      satisfiedSince: T,
      dueAt: T + 90 * SEC,
    });
    expect(decide(p, restarted, [up(HOUR)], T + 90 * SEC)).toEqual({ kind: 'trigger', reason: 'covered' });
  });

  it('falling out of satisfaction forgets when it was satisfied', () => {
    const p = policy({ settleMs: 60 * SEC });
    const settling = facts({ state: 'settling', satisfiedSince: T });
    expect(decide(p, settling, [up(HOUR - 1)], T + 120 * SEC)).toEqual({
      kind: 'wait',
      state: 'waiting',
      satisfiedSince: null,
      dueAt: null,
    });
  });

  it('deadline with on_deadline trigger: waits until end + deadline, then triggers with what is there', () => {
    const end = T;
    const p = policy({ deadlineMs: 3600 * SEC, onDeadline: 'trigger' });
    const f = facts({ endMs: end });
    expect(decide(p, f, [up(HOUR / 2)], end + 3600 * SEC - 1)).toEqual({
      kind: 'wait',
      state: 'waiting',
      satisfiedSince: null,
      dueAt: end + 3600 * SEC,
    });
    expect(decide(p, f, [up(HOUR / 2)], end + 3600 * SEC)).toEqual({ kind: 'trigger', reason: 'deadline' });
    // Nothing at all arrived: the deadline still triggers.
    expect(decide(p, f, [up(0)], end + 7200 * SEC)).toEqual({ kind: 'trigger', reason: 'deadline' });
  });

  it('deadline with on_deadline miss: marks the period missed, and missed stays missed', () => {
    const p = policy({ deadlineMs: 60 * SEC, onDeadline: 'miss' });
    expect(decide(p, facts({ endMs: T }), [up(HOUR / 2)], T + 60 * SEC - 1)).toMatchObject({
      kind: 'wait',
      state: 'waiting',
      dueAt: T + 60 * SEC,
    });
    expect(decide(p, facts({ endMs: T }), [up(HOUR / 2)], T + 60 * SEC)).toEqual({ kind: 'miss' });
    // Data that arrives after the miss does not revive it.
    expect(decide(p, facts({ state: 'missed', endMs: T }), [up(HOUR)], T + 120 * SEC)).toEqual({
      kind: 'wait',
      state: 'missed',
      satisfiedSince: null,
      dueAt: null,
    });
  });

  it('a satisfied period still settling at its deadline triggers then, as covered, never missed', () => {
    const p = policy({ settleMs: 60 * SEC, deadlineMs: 30 * SEC, onDeadline: 'miss' });
    // Satisfied at end + 10 s; touching events keep restarting settle.
    const settling = facts({
      state: 'settling',
      satisfiedSince: T + 10 * SEC,
      endMs: T,
      lastChangeAt: T + 25 * SEC,
    });
    expect(decide(p, settling, [up(HOUR)], T + 20 * SEC)).toEqual({
      kind: 'wait',
      state: 'settling',
      satisfiedSince: T + 10 * SEC,
      dueAt: T + 30 * SEC,
    });
    expect(decide(p, settling, [up(HOUR)], T + 30 * SEC)).toEqual({ kind: 'trigger', reason: 'covered' });
    // Reruns have no deadline: settle alone decides.
    const rerun = facts({
      state: 'rerun_pending',
      generation: 1,
      rerun: 'update',
      satisfiedSince: T,
      endMs: T,
      lastChangeAt: T + 25 * SEC,
    });
    expect(
      decide(policy({ settleMs: 60 * SEC, deadlineMs: 30 * SEC }), rerun, [up(HOUR)], T + 40 * SEC),
    ).toMatchObject({
      kind: 'wait',
      dueAt: T + 85 * SEC,
    });
  });

  it('integer periods (no end instant) have no deadline', () => {
    const p = policy({ deadlineMs: 0, onDeadline: 'miss' });
    expect(decide(p, facts({ endMs: null }), [up(5, 10)], T)).toEqual({
      kind: 'wait',
      state: 'waiting',
      satisfiedSince: null,
      dueAt: null,
    });
  });

  describe('reruns after a trigger', () => {
    const triggered = (f: Partial<PeriodFacts> = {}) => facts({ state: 'triggered', generation: 1, ...f });

    it('rerun never (no rerun owed): a triggered period stays triggered whatever arrives', () => {
      expect(decide(policy(), triggered(), [up(HOUR)], T)).toEqual({
        kind: 'wait',
        state: 'triggered',
        satisfiedSince: null,
        dueAt: null,
      });
      expect(decide(policy({ deadlineMs: 0 }), triggered({ endMs: T }), [up(0)], T + 1)).toMatchObject({
        state: 'triggered',
      });
    });

    it('on_update: a newer completion reruns with reason update, coalesced by settle', () => {
      const p = policy({ settleMs: 60 * SEC });
      const pending = triggered({ state: 'rerun_pending', rerun: 'update', lastChangeAt: T - SEC });
      expect(decide(p, pending, [up(HOUR)], T)).toEqual({
        kind: 'wait',
        state: 'rerun_pending',
        satisfiedSince: T,
        dueAt: T + 60 * SEC,
      });
      const later = { ...pending, satisfiedSince: T, lastChangeAt: T + 30 * SEC };
      expect(decide(p, later, [up(HOUR)], T + 60 * SEC)).toMatchObject({ kind: 'wait', dueAt: T + 90 * SEC });
      expect(decide(p, later, [up(HOUR)], T + 90 * SEC)).toEqual({ kind: 'trigger', reason: 'update' });
      expect(decide(policy(), pending, [up(HOUR)], T)).toEqual({ kind: 'trigger', reason: 'update' });
    });

    it('on_replay: waits while the replay is owed, reruns with reason replay once satisfied again', () => {
      const pending = triggered({ state: 'rerun_pending', rerun: 'replay' });
      // Replay required: the period is not complete.
      const owed: UpstreamFacts = { ratio: 0, notComplete: HOUR, replayRequired: HOUR };
      expect(decide(policy(), pending, [owed], T)).toEqual({
        kind: 'wait',
        state: 'rerun_pending',
        satisfiedSince: null,
        dueAt: null,
      });
      // A deadline does not apply to reruns.
      expect(
        decide(policy({ deadlineMs: 0 }), { ...pending, endMs: T - HOUR / 1000 }, [owed], T),
      ).toMatchObject({
        kind: 'wait',
        state: 'rerun_pending',
      });
      expect(decide(policy(), pending, [up(HOUR)], T)).toEqual({ kind: 'trigger', reason: 'replay' });
      expect(decide(policy({ ratio: 0.98 }), pending, [up(3528e6)], T)).toEqual({
        kind: 'trigger',
        reason: 'replay',
      });
    });

    it('on_replay with a tolerant policy: waits for the rebuilt data even while satisfied', () => {
      const pending = triggered({ state: 'rerun_pending', rerun: 'replay' });
      // 59 of 60 minutes complete satisfies ratio 0.98, but the missing minute is replay_required.
      const condemned: UpstreamFacts = { ratio: 59 / 60, notComplete: HOUR / 60, replayRequired: HOUR / 60 };
      expect(decide(policy({ ratio: 0.98 }), pending, [condemned], T)).toMatchObject({
        kind: 'wait',
        state: 'rerun_pending',
      });
      // The same shortfall as a plain gap owes no rebuild: the rerun goes ahead.
      const gap: UpstreamFacts = { ...condemned, replayRequired: 0 };
      expect(decide(policy({ ratio: 0.98 }), pending, [gap], T)).toEqual({
        kind: 'trigger',
        reason: 'replay',
      });
      // An update rerun does not wait on replay_required.
      const update = triggered({ state: 'rerun_pending', rerun: 'update' });
      expect(decide(policy({ ratio: 0.98 }), update, [condemned], T)).toEqual({
        kind: 'trigger',
        reason: 'update',
      });
    });
  });

  it('manual always triggers, whatever the state and coverage', () => {
    for (const f of [
      facts(),
      facts({ state: 'missed' }),
      facts({ state: 'triggered', generation: 3 }),
      facts({ state: 'rerun_pending', generation: 1, rerun: 'replay' }),
    ]) {
      expect(decide(policy(), { ...f, manual: true }, [up(0)], T)).toEqual({
        kind: 'trigger',
        reason: 'manual',
      });
    }
  });
});

describe('properties', () => {
  const complete = fc.integer({ min: 0, max: HOUR });
  const threshold = fc.integer({ min: 1, max: 1000 }).map((n) => n / 1000);

  it('satisfaction is monotone in the covered share', () => {
    fc.assert(
      fc.property(complete, complete, threshold, (a, b, r) => {
        const [lo, hi] = a <= b ? [a, b] : [b, a];
        const p = policy({ ratio: r });
        if (satisfaction(p, [up(lo)]) !== 'no') expect(satisfaction(p, [up(hi)])).not.toBe('no');
      }),
    );
  });

  it('satisfaction is monotone in the policy: a laxer ratio or max_missing accepts whatever a stricter one does', () => {
    fc.assert(
      fc.property(complete, threshold, threshold, complete, complete, (c, r1, r2, m1, m2) => {
        const [lax, strict] = r1 <= r2 ? [r1, r2] : [r2, r1];
        if (satisfaction(policy({ ratio: strict }), [up(c)]) !== 'no')
          expect(satisfaction(policy({ ratio: lax }), [up(c)])).not.toBe('no');
        const [small, big] = m1 <= m2 ? [m1, m2] : [m2, m1];
        if (satisfaction(policy({ maxMissing: small }), [up(c)]) !== 'no')
          expect(satisfaction(policy({ maxMissing: big }), [up(c)])).not.toBe('no');
      }),
    );
  });

  it('the ratio threshold is exact: k/width satisfies r = k/width, (k-1)/width does not', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1000 }), (k) => {
        const width = 1000 * 3600e3; // an hour in µs, in 1000 steps of 3.6 s
        const r = k / 1000;
        const covered = (k * width) / 1000;
        expect(satisfaction(policy({ ratio: r }), [up(covered, width)])).not.toBe('no');
        expect(satisfaction(policy({ ratio: r }), [up(covered - 1, width)])).toBe('no');
      }),
    );
  });

  it('adding an upstream never makes a period more satisfied', () => {
    fc.assert(
      fc.property(fc.array(complete, { minLength: 1, maxLength: 4 }), complete, threshold, (cs, extra, r) => {
        const p = policy({ ratio: r });
        const rank = { no: 0, partial: 1, full: 2 } as const;
        const before = satisfaction(
          p,
          cs.map((c) => up(c)),
        );
        const after = satisfaction(p, [...cs.map((c) => up(c)), up(extra)]);
        expect(rank[after]).toBeLessThanOrEqual(rank[before]);
      }),
    );
  });

  it('an unsatisfied, untriggered period never triggers before its deadline, except manually', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: HOUR - 1 }),
        fc.integer({ min: 0, max: 7200 * SEC }),
        fc.integer({ min: -7200 * SEC, max: 7200 * SEC }),
        fc.constantFrom<'trigger' | 'miss'>('trigger', 'miss'),
        (c, deadlineMs, offset, onDeadline) => {
          const p = policy({ deadlineMs, onDeadline });
          const now = T + deadlineMs + offset;
          const outcome = decide(p, facts({ endMs: T }), [up(c)], now);
          if (offset < 0)
            expect(outcome).toMatchObject({ kind: 'wait', state: 'waiting', dueAt: T + deadlineMs });
          else if (onDeadline === 'trigger') expect(outcome).toEqual({ kind: 'trigger', reason: 'deadline' });
          else expect(outcome).toEqual({ kind: 'miss' });
        },
      ),
    );
  });

  it('a satisfied period triggers once ended and quiet for settle since it was satisfied, or at its deadline', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 600 * SEC }),
        fc.option(fc.integer({ min: -600 * SEC, max: 600 * SEC })),
        fc.option(fc.integer({ min: -600 * SEC, max: 600 * SEC })),
        fc.integer({ min: -600 * SEC, max: 1200 * SEC }),
        fc.boolean(),
        fc.option(fc.integer({ min: 0, max: 900 * SEC })),
        (settleMs, since, change, elapsed, full, deadlineMs) => {
          const satisfiedSince = since === null ? null : T + since;
          const lastChangeAt = change === null ? null : T + change;
          const now = T + elapsed;
          const p = policy({ settleMs, ratio: 0.98, ...(deadlineMs === null ? {} : { deadlineMs }) });
          const f = facts({
            state: satisfiedSince === null ? 'waiting' : 'settling',
            satisfiedSince,
            lastChangeAt,
            endMs: T,
          });
          const outcome = decide(p, f, [up(full ? HOUR : 3528e6)], now);
          const quiet = Math.max(satisfiedSince ?? now, lastChangeAt ?? satisfiedSince ?? now);
          // The period ends at T: never before it, never after its deadline.
          const settled = Math.max(quiet + settleMs, T);
          const due = deadlineMs === null ? settled : Math.min(settled, T + deadlineMs);
          if (now >= due) expect(outcome).toEqual({ kind: 'trigger', reason: full ? 'covered' : 'ratio' });
          else
            expect(outcome).toEqual({
              kind: 'wait',
              state: 'settling',
              satisfiedSince: satisfiedSince ?? now,
              dueAt: due,
            });
        },
      ),
    );
  });

  it('a wait with a due time decides (triggers or misses) at that time when nothing changes', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: HOUR }),
        fc.integer({ min: 0, max: 600 * SEC }),
        fc.integer({ min: 0, max: 600 * SEC }),
        fc.constantFrom<'trigger' | 'miss'>('trigger', 'miss'),
        fc.integer({ min: -600 * SEC, max: 600 * SEC }),
        (c, settleMs, deadlineMs, onDeadline, offset) => {
          const p = policy({ settleMs, deadlineMs, onDeadline, ratio: 0.98 });
          const now = T + offset;
          const f = facts({ endMs: T, lastChangeAt: T - 1 });
          const first = decide(p, f, [up(c)], now);
          if (first.kind !== 'wait' || first.dueAt === null) return;
          expect(first.dueAt).toBeGreaterThan(now);
          const again = decide(
            p,
            { ...f, state: first.state, satisfiedSince: first.satisfiedSince },
            [up(c)],
            first.dueAt,
          );
          expect(again.kind).not.toBe('wait');
        },
      ),
    );
  });
});
