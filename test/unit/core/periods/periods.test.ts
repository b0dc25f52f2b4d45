/**
 * Sparse periods: counting, deriving and summarising periods without rows, each checked against
 * a brute-force walk of the calendar.
 */
import fc from 'fast-check';
import { Duration } from 'luxon';
import { describe, expect, it } from 'vitest';
import type { Period } from '../../../../src/core/periods/calendar.js';
import { countStarts } from '../../../../src/core/periods/period-count.js';
import {
  combineCounts,
  derivedState,
  missedBefore,
  nextPassAt,
  passedBefore,
  periodOfKey,
  type StoredState,
  storedFacts,
  summaryRuns,
  untouchedFacts,
} from '../../../../src/core/periods/periods.js';
import { PERIOD_STATES, type PeriodState } from '../../../../src/core/periods/policy.js';
import { defineRollup, type Rollup } from '../../../../src/core/rollups/rollup.js';

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
const BEGIN = '2025-03-01T00:00:00Z';
const BEGIN_US = Date.parse(BEGIN) * 1000;

/** Durations as the config hands them over: milliseconds. */
const ms = (iso: unknown) => (typeof iso === 'string' ? Duration.fromISO(iso).toMillis() : undefined);

function rollupOf(
  every: string | number,
  timezone: string,
  policy: { deadline?: string; on_deadline?: string; catch_up?: string | undefined } = {},
): Rollup {
  return defineRollup({
    id: 'r',
    upstream: ['a', 'b'],
    every,
    timezone,
    begin: typeof every === 'number' ? 0 : BEGIN,
    policy: {
      settle: 0,
      on_deadline: (policy.on_deadline ?? 'trigger') as 'trigger' | 'miss',
      deadline: ms(policy.deadline),
      catch_up: ms(policy.catch_up),
    },
    rerun: 'never',
  });
}

/** Every period starting in [a, b), by walking the calendar. */
function walk(rollup: Rollup, a: number, b: number): Period[] {
  const out: Period[] = [];
  let p = rollup.calendar.periodContaining(a);
  if (p.start < a) p = rollup.calendar.next(p);
  for (; p.start < b; p = rollup.calendar.next(p)) out.push(p);
  return out;
}

const GRIDS: Array<[string | number, string]> = [
  ['hour', 'UTC'],
  ['hour', 'Europe/Berlin'],
  ['hour', 'Australia/Lord_Howe'],
  ['day', 'America/Sao_Paulo'],
  ['minute', 'UTC'],
  ['week', 'UTC'],
  ['month', 'Asia/Kathmandu'],
  ['PT15M', 'UTC'],
  ['P1D', 'Europe/Berlin'],
  [7, 'UTC'],
];

describe('countStarts', () => {
  it('equals a walk of the calendar, on fixed grids and on zones with daylight saving', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...GRIDS),
        fc.integer({ min: 0, max: 400 * DAY_MS }),
        fc.integer({ min: 0, max: 10 * DAY_MS }),
        ([every, zone], offsetMs, lengthMs) => {
          const rollup = rollupOf(every, zone);
          const scale = typeof every === 'number' ? 1 / 60_000 : 1000; // integer grids: small values
          const a = Math.round((typeof every === 'number' ? 0 : BEGIN_US) + offsetMs * scale);
          const b = Math.round(a + lengthMs * scale);
          expect(countStarts(rollup.calendar, a, b)).toBe(walk(rollup, a, b).length);
        },
      ),
      { numRuns: 150 },
    );
  });

  it('counts three years of hours once per grid, not once per rollup', () => {
    const end = Date.parse('2026-01-01T00:00:00Z') * 1000;
    const first = rollupOf('hour', 'Europe/Berlin');
    expect(countStarts(first.calendar, BEGIN_US, end)).toBe(walk(first, BEGIN_US, end).length);
    // Another rollup on the same grid answers from the remembered chunks.
    const second = rollupOf('hour', 'Europe/Berlin');
    const started = performance.now();
    for (let i = 0; i < 1000; i++) countStarts(second.calendar, BEGIN_US, end - i * 3600e6);
    // Not a timing assertion on the product: a walk of 7,300 hours a thousand times would take
    // tens of seconds; this only guards that the memo is shared.
    expect(performance.now() - started).toBeLessThan(5000);
  });
});

describe('periodOfKey', () => {
  it('finds every period by its key, on every kind of calendar, and nothing for a key it never gives', () => {
    const grids: Array<[string | number, string]> = [
      ...GRIDS,
      ['quarter', 'UTC'],
      ['year', 'Asia/Kathmandu'],
      ['PT15M', 'Australia/Lord_Howe'],
    ];
    fc.assert(
      fc.property(
        fc.constantFrom(...grids),
        fc.integer({ min: 0, max: 800 * DAY_MS }),
        ([every, zone], offset) => {
          const rollup = rollupOf(every, zone);
          const point = typeof every === 'number' ? Math.floor(offset / 60_000) : BEGIN_US + offset * 1000;
          const period = rollup.calendar.periodContaining(point);
          expect(periodOfKey(rollup, period.key)).toEqual(period);
        },
      ),
      { numRuns: 300 },
    );
    // The repeated hour of a fall-back day has its own key.
    const berlin = rollupOf('hour', 'Europe/Berlin');
    expect(periodOfKey(berlin, '2025-10-26T02')!.end).toBe(periodOfKey(berlin, '2025-10-26T02+01:00')!.start);
    for (const bad of ['2025-13', 'nonsense', '2025-06-01T10:30', ''])
      expect(periodOfKey(berlin, bad)).toBeNull();
  });
});

describe('derived states', () => {
  const policies = fc.record({
    deadline: fc.constantFrom('PT0S', 'PT30M', 'PT1H', 'PT6H', 'P2D'),
    on_deadline: fc.constantFrom('trigger', 'miss'),
    catch_up: fc.option(fc.constantFrom('PT0S', 'PT1H', 'P1D', 'P7D'), { nil: undefined }),
  });

  it('missedBefore splits the periods exactly where derivedState turns from missed to waiting', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...GRIDS.filter(([e]) => typeof e !== 'number')),
        policies,
        fc.integer({ min: 0, max: 30 * DAY_MS }),
        ([every, zone], policy, nowOffset) => {
          const rollup = rollupOf(every, zone, policy);
          const nowMs = Date.parse(BEGIN) + nowOffset;
          const split = missedBefore(rollup, nowMs)!;
          // The periods around the split, and a sample from the start.
          const near = walk(rollup, Math.max(rollup.begin, split - 3 * 86_400e6), split + 3 * 86_400e6);
          for (const p of [...walk(rollup, rollup.begin, rollup.begin + 86_400e6), ...near]) {
            if (p.start > nowMs * 1000) continue;
            expect(derivedState(rollup, p, nowMs)).toBe(p.start < split ? 'missed' : 'waiting');
          }
        },
      ),
      { numRuns: 120 },
    );
  });

  it('never misses without a deadline, and owes a deadline trigger only within catch_up', () => {
    const plain = rollupOf('hour', 'UTC');
    expect(missedBefore(plain, Date.parse('2030-01-01T00:00:00Z'))).toBeNull();
    const period = plain.calendar.periodContaining(BEGIN_US);
    expect(derivedState(plain, period, Date.parse('2030-01-01T00:00:00Z'))).toBe('waiting');

    const owed = rollupOf('hour', 'UTC', { deadline: 'PT1H', catch_up: 'PT2H' });
    const end = Date.parse(BEGIN) + HOUR_MS;
    expect(derivedState(owed, period, end + HOUR_MS - 1)).toBe('waiting');
    expect(derivedState(owed, period, end + HOUR_MS)).toBe('waiting'); // owed: the scheduler triggers it
    expect(derivedState(owed, period, end + 3 * HOUR_MS - 1)).toBe('waiting');
    expect(derivedState(owed, period, end + 3 * HOUR_MS)).toBe('missed'); // beyond catch-up
  });

  it('nextPassAt is the first instant at which passedBefore moves', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...GRIDS.filter(([e]) => typeof e !== 'number')),
        fc.integer({ min: 0, max: 30 * DAY_MS }),
        fc.constantFrom(0, 1000, HOUR_MS, DAY_MS),
        ([every, zone], offset, late) => {
          const rollup = rollupOf(every, zone);
          const nowMs = Date.parse(BEGIN) + offset;
          const next = nextPassAt(rollup, nowMs, late);
          expect(next).toBeGreaterThan(nowMs);
          expect(passedBefore(rollup, next - 1, late)).toBe(passedBefore(rollup, nowMs, late));
          expect(passedBefore(rollup, next, late)).toBeGreaterThan(passedBefore(rollup, nowMs, late));
        },
      ),
      { numRuns: 100 },
    );
  });
});

describe('counts and summary', () => {
  /** Brute force: the state of every period, stored or derived. */
  function model(rollup: Rollup, from: number, to: number, rows: StoredState[], nowMs: number) {
    const byStart = new Map(rows.map((r) => [r.start, r.state]));
    return walk(rollup, from, to).map((p) => ({
      ...p,
      state: byStart.get(p.start) ?? derivedState(rollup, p, nowMs),
    }));
  }

  it('combineCounts and summaryRuns agree with the state of every period', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...GRIDS.filter(([e]) => typeof e !== 'number')),
        fc.constantFrom('trigger', 'miss'),
        fc.integer({ min: 1, max: 20 * DAY_MS }),
        fc.array(fc.tuple(fc.nat(), fc.constantFrom(...PERIOD_STATES)), { maxLength: 40 }),
        ([every, zone], onDeadline, nowOffset, picks) => {
          const rollup = rollupOf(every, zone, {
            deadline: 'PT2H',
            on_deadline: onDeadline,
            catch_up: 'P1D',
          });
          const nowMs = Date.parse(BEGIN) + nowOffset;
          const from = rollup.begin;
          const to = rollup.calendar.periodContaining(nowMs * 1000).end;
          const all = walk(rollup, from, to);
          const stored = new Map<number, StoredState>();
          for (const [i, state] of picks) {
            const p = all[i % all.length]!;
            stored.set(p.start, { start: p.start, end: p.end, state });
          }
          const rows = [...stored.values()].sort((a, b) => a.start - b.start);
          const truth = model(rollup, from, to, rows, nowMs);
          const missedAt = missedBefore(rollup, nowMs);
          const storedCounts: Partial<Record<PeriodState, number>> = {};
          for (const r of rows) storedCounts[r.state] = (storedCounts[r.state] ?? 0) + 1;
          const beforeMissed = rows.filter((r) => missedAt !== null && r.start < missedAt).length;
          const counts = combineCounts(rollup, from, to, missedAt, { counts: storedCounts, beforeMissed });
          for (const s of PERIOD_STATES) expect(counts[s]).toBe(truth.filter((t) => t.state === s).length);

          const runs = summaryRuns(rollup, from, to, missedAt, rows);
          const expanded = runs.flatMap((r) =>
            walk(rollup, r.start, r.end).map((p) => ({ ...p, state: r.state })),
          );
          expect(expanded).toEqual(truth);
          expect(runs.reduce((n, r) => n + r.count, 0)).toBe(truth.length);
          for (let i = 1; i < runs.length; i++) expect(runs[i]!.state).not.toBe(runs[i - 1]!.state);
        },
      ),
      { numRuns: 100 },
    );
  });
});

describe('storedFacts', () => {
  it('maps a row as nothing happened to it to the facts of an untouched period', () => {
    fc.assert(
      fc.property(fc.constantFrom(...GRIDS), fc.integer({ min: 0, max: 400 * DAY_MS }), ([every, tz], at) => {
        const rollup = rollupOf(every, tz);
        const p = rollup.calendar.periodContaining(
          rollup.begin + (typeof every === 'number' ? at : at * 1000),
        );
        const untouched = {
          state: 'waiting' as const,
          generation: 0,
          satisfiedSince: null,
          lastChangeAt: null,
          rerun: null,
          manualRequested: false,
        };
        expect(storedFacts(rollup, p.end, untouched)).toEqual(untouchedFacts(rollup, p));
      }),
    );
  });

  it('carries the row over, instants as milliseconds', () => {
    const rollup = rollupOf('hour', 'UTC');
    const p = rollup.calendar.periodContaining(BEGIN_US);
    const row = {
      state: 'settling' as const,
      generation: 3,
      satisfiedSince: new Date(BEGIN_US / 1000 + 5),
      lastChangeAt: new Date(BEGIN_US / 1000 + 7),
      rerun: 'replay' as const,
      manualRequested: true,
    };
    expect(storedFacts(rollup, p.end, row)).toEqual({
      state: 'settling',
      generation: 3,
      satisfiedSince: BEGIN_US / 1000 + 5,
      lastChangeAt: BEGIN_US / 1000 + 7,
      rerun: row.rerun,
      manual: true,
      endMs: p.end / 1000,
    });
  });
});
