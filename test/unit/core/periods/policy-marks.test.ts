import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  PERIOD_STATES,
  type PeriodState,
  type Rerun,
  type RerunRule,
  rerunOwed,
  stateAfterMark,
} from '../../../../src/core/periods/policy.js';

const RULES: readonly RerunRule[] = ['never', 'on_replay', 'on_update'];
const none = { completionSeq: 0, replaySeq: 0 };

describe('rerunOwed', () => {
  it('owes nothing to a period that was never triggered, whatever touched it', () => {
    for (const rule of RULES)
      expect(rerunOwed(rule, undefined, { completionSeq: 9, replaySeq: 9 })).toBeNull();
  });

  it('owes nothing with rerun: never', () => {
    expect(rerunOwed('never', 3, { completionSeq: 9, replaySeq: 9 })).toBeNull();
  });

  it('owes a replay rerun for a replay requirement newer than the trigger, under on_replay and on_update', () => {
    expect(rerunOwed('on_replay', 3, { completionSeq: 0, replaySeq: 4 })).toBe('replay');
    expect(rerunOwed('on_update', 3, { completionSeq: 0, replaySeq: 4 })).toBe('replay');
    expect(rerunOwed('on_replay', 4, { completionSeq: 0, replaySeq: 4 })).toBeNull();
  });

  it('owes an update rerun for a newer completion only under on_update', () => {
    expect(rerunOwed('on_update', 3, { completionSeq: 4, replaySeq: 0 })).toBe('update');
    expect(rerunOwed('on_replay', 3, { completionSeq: 4, replaySeq: 0 })).toBeNull();
    expect(rerunOwed('on_update', 4, { completionSeq: 4, replaySeq: 0 })).toBeNull();
  });

  it('names the replay when both are newer: the rebuilt data is what the rerun waits for', () => {
    expect(rerunOwed('on_update', 1, { completionSeq: 5, replaySeq: 2 })).toBe('replay');
  });

  it('counts a trigger that recorded no position (seen 0) as having seen nothing', () => {
    expect(rerunOwed('on_update', 0, { completionSeq: 1, replaySeq: 0 })).toBe('update');
    expect(rerunOwed('on_update', 0, none)).toBeNull();
  });

  it('agrees with the event-by-event model: a rerun for any event after the trigger the rule counts', () => {
    const event = fc.record({ seq: fc.integer({ min: 1, max: 50 }), replay: fc.boolean() });
    fc.assert(
      fc.property(
        fc.constantFrom(...RULES),
        fc.option(fc.integer({ min: 0, max: 50 }), { nil: undefined }),
        fc.array(event, { maxLength: 12 }),
        (rule, seen, events) => {
          // The model looks at every event; the mark hands rerunOwed only the newest seq of each kind.
          const newer = seen === undefined ? [] : events.filter((e) => e.seq > seen);
          let want: Rerun | null = null;
          if (rule !== 'never' && newer.some((e) => e.replay)) want = 'replay';
          else if (rule === 'on_update' && newer.some((e) => !e.replay)) want = 'update';
          const touch = {
            completionSeq: Math.max(0, ...events.filter((e) => !e.replay).map((e) => e.seq)),
            replaySeq: Math.max(0, ...events.filter((e) => e.replay).map((e) => e.seq)),
          };
          expect(rerunOwed(rule, seen, touch)).toBe(want);
        },
      ),
    );
  });
});

describe('stateAfterMark', () => {
  it('makes a triggered period owed a rerun rerun_pending at once', () => {
    expect(stateAfterMark('triggered', 'replay')).toBe('rerun_pending');
    expect(stateAfterMark('triggered', 'update')).toBe('rerun_pending');
  });

  it('leaves a triggered period alone when no rerun is owed', () => {
    expect(stateAfterMark('triggered', null)).toBe('triggered');
  });

  it('never moves any other state: decide() does, at the evaluation', () => {
    const arb = fc.tuple(
      fc.constantFrom<PeriodState>(...PERIOD_STATES.filter((s) => s !== 'triggered')),
      fc.constantFrom<Rerun | null>('replay', 'update', null),
    );
    fc.assert(
      fc.property(arb, ([state, rerun]) => {
        expect(stateAfterMark(state, rerun)).toBe(state);
      }),
    );
  });

  it('is idempotent: marking twice is marking once', () => {
    const arb = fc.tuple(
      fc.constantFrom<PeriodState>(...PERIOD_STATES),
      fc.constantFrom<Rerun | null>('replay', 'update', null),
    );
    fc.assert(
      fc.property(arb, ([state, rerun]) => {
        expect(stateAfterMark(stateAfterMark(state, rerun), rerun)).toBe(stateAfterMark(state, rerun));
      }),
    );
  });
});
