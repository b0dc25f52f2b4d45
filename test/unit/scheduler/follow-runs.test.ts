import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nextCheckMs } from '../../../src/scheduler/follow-runs.js';

const checks = { openMs: 2000, watchMs: 30_000 };
const T = Date.UTC(2026, 5, 1, 12);
const HOUR = 3_600_000;

describe('when a run is asked about again', () => {
  it('an open queue job: every interval while young, then a tenth of its age, at most every minute', () => {
    const open = (ageMs: number) => ({
      state: 'started' as const,
      startedAt: new Date(T - ageMs),
      finishedAt: null,
    });
    expect(nextCheckMs('queue', open(5_000), checks, HOUR, T)).toBe(2000);
    expect(nextCheckMs('queue', open(100_000), checks, HOUR, T)).toBe(10_000);
    expect(nextCheckMs('queue', open(HOUR), checks, HOUR, T)).toBe(60_000);
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10 * HOUR }), fc.integer({ min: 0, max: 10 * HOUR }), (a, b) => {
        const [young, old] = a <= b ? [a, b] : [b, a];
        const [x, y] = [
          nextCheckMs('queue', open(young), checks, HOUR, T)!,
          nextCheckMs('queue', open(old), checks, HOUR, T)!,
        ];
        return x <= y && x >= checks.openMs && y <= 60_000;
      }),
    );
  });

  it('an open Airflow run keeps the interval: no event stream tells its outcome sooner', () => {
    const run = { state: 'running' as const, startedAt: new Date(T - HOUR), finishedAt: null };
    expect(nextCheckMs('airflow', run, checks, HOUR, T)).toBe(2000);
  });

  it('a finished run: never again, except an Airflow run watched for a clear until its timeout', () => {
    const done = {
      state: 'succeeded' as const,
      startedAt: new Date(T - HOUR),
      finishedAt: new Date(T - 1000),
    };
    expect(nextCheckMs('queue', done, checks, HOUR, T)).toBeNull();
    expect(nextCheckMs('airflow', done, checks, HOUR, T)).toBe(30_000);
    expect(nextCheckMs('airflow', done, checks, HOUR, T + HOUR)).toBeNull();
    expect(
      nextCheckMs('queue', { state: 'pending', startedAt: null, finishedAt: null }, checks, HOUR, T),
    ).toBeNull();
  });
});
