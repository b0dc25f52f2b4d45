import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  airflowRunReport,
  applyReport,
  DEFAULT_RUN_POLICY,
  isFinished,
  isOpen,
  manualRetryRefusal,
  parseRunId,
  queueJobReport,
  RUN_STATES,
  type RunFacts,
  type RunPolicy,
  type RunReport,
  type RunState,
  retryDelayMs,
  runId,
  UNSUCCESSFUL_STATES,
} from '../../../../src/core/runs/runs.js';

const T = Date.parse('2026-06-01T10:00:00Z');
const policy: RunPolicy = { retries: 2, backoffMs: 60_000, timeoutMs: 3_600_000 };

const run = (f: Partial<RunFacts> = {}): RunFacts => ({
  attempt: 1,
  state: 'pending',
  error: null,
  version: null,
  startedAt: null,
  finishedAt: null,
  timeoutAt: null,
  nextRetryAt: null,
  ...f,
});

const current = { current: true, policy, now: T };

const arbState = fc.constantFrom(...RUN_STATES);
const arbReport: fc.Arbitrary<RunReport> = fc.oneof(
  fc.constant({ kind: 'delivered' as const }),
  fc.constant({ kind: 'timeout' as const }),
  fc.string().map((error) => ({ kind: 'refused' as const, error })),
  fc.record({
    kind: fc.constant('target' as const),
    state: fc.constantFrom('running' as const, 'succeeded' as const, 'failed' as const, 'lost' as const),
    error: fc.option(fc.string(), { nil: undefined }),
    version: fc.option(fc.string(), { nil: undefined }),
    reopen: fc.option(fc.boolean(), { nil: undefined }),
  }),
);
const arbRun: fc.Arbitrary<RunFacts> = fc
  .record({ state: arbState, attempt: fc.integer({ min: 1, max: 6 }) })
  .map(({ state, attempt }) =>
    run({
      state,
      attempt,
      startedAt: state === 'pending' ? null : T - 60_000,
      finishedAt: isFinished(state) ? T - 1000 : null,
      timeoutAt: state === 'pending' ? null : T + 3_000_000,
    }),
  );
const arbPolicy: fc.Arbitrary<RunPolicy> = fc.record({
  retries: fc.integer({ min: 0, max: 5 }),
  backoffMs: fc.integer({ min: 1, max: 3_600_000 }),
  timeoutMs: fc.integer({ min: 1000, max: 86_400_000 }),
});

describe('run transitions', () => {
  it('a delivery starts a pending run, with its timeout counted from then', () => {
    const { effect, run: after } = applyReport(run(), { kind: 'delivered' }, current);
    expect(effect).toBe('applied');
    expect(after).toMatchObject({ state: 'started', startedAt: T, timeoutAt: T + policy.timeoutMs });
  });

  it('a refused delivery fails attempt 1 and schedules attempt 2 after one backoff', () => {
    const { run: after } = applyReport(run(), { kind: 'refused', error: 'HTTP 400: no' }, current);
    expect(after).toMatchObject({ state: 'failed', error: 'HTTP 400: no', startedAt: null, finishedAt: T });
    expect(after.nextRetryAt).toBe(T + 60_000);
  });

  it('the last allowed attempt fails for good: no retry after attempt retries + 1', () => {
    const started = run({ state: 'running', attempt: 3, startedAt: T - 1 });
    const { run: after } = applyReport(started, { kind: 'target', state: 'failed', error: 'boom' }, current);
    expect(after).toMatchObject({ state: 'failed', error: 'boom', nextRetryAt: null });
  });

  it('times out only a started or running run, and retries it under the same policy', () => {
    const started = run({ state: 'started', startedAt: T - 1, timeoutAt: T });
    const { run: after } = applyReport(started, { kind: 'timeout' }, current);
    expect(after.state).toBe('timed_out');
    expect(after.error).toMatch(/no outcome within 3600 s/);
    expect(after.nextRetryAt).toBe(T + 60_000);
    expect(applyReport(run(), { kind: 'timeout' }, current).effect).toBe('refused');
  });

  it('a removed job is lost, never succeeded', () => {
    const report = queueJobReport('unknown', undefined)!;
    const { run: after } = applyReport(run({ state: 'started', startedAt: T - 1 }), report, current);
    expect(after.state).toBe('lost');
  });

  it('a lost run whose success is learnt later (its completion event read after the job was gone) succeeds', () => {
    const lost = run({ state: 'lost', startedAt: T - 10, finishedAt: T - 5, nextRetryAt: T + 60_000 });
    const { effect, run: after } = applyReport(lost, { kind: 'target', state: 'succeeded' }, current);
    expect(effect).toBe('applied');
    expect(after).toMatchObject({ state: 'succeeded', error: null, nextRetryAt: null, finishedAt: T });
    expect(applyReport(lost, { kind: 'target', state: 'failed', error: 'x' }, current).effect).toBe(
      'refused',
    );
  });

  it('a cleared Airflow run reopens: failed goes back to running and its retry is dropped', () => {
    const failed = run({ state: 'failed', startedAt: T - 10, finishedAt: T - 5, nextRetryAt: T + 1 });
    const { effect, run: after } = applyReport(failed, airflowRunReport('queued')!, current);
    expect(effect).toBe('applied');
    expect(after).toMatchObject({ state: 'running', finishedAt: null, nextRetryAt: null, error: null });
    expect(after.timeoutAt).toBe(T + policy.timeoutMs);
  });

  it('a callback saying running after the outcome does not reopen (a reordered retry of the caller)', () => {
    const done = run({ state: 'succeeded', startedAt: T - 10, finishedAt: T - 5 });
    expect(applyReport(done, { kind: 'target', state: 'running' }, current).effect).toBe('refused');
  });

  it('a repeated report changes nothing (idempotent)', () => {
    const done = run({ state: 'succeeded', startedAt: T - 10, finishedAt: T - 5 });
    expect(applyReport(done, { kind: 'target', state: 'succeeded' }, current)).toEqual({
      effect: 'unchanged',
      run: done,
    });
  });

  it('records the version a success reports', () => {
    const started = run({ state: 'running', startedAt: T - 1 });
    const report: RunReport = { kind: 'target', state: 'succeeded', version: 'v7' };
    expect(applyReport(started, report, current).run.version).toBe('v7');
  });
});

describe('run transition properties', () => {
  it('a finished run never moves, except a reopen to running and a lost run that succeeded', () => {
    fc.assert(
      fc.property(arbRun, arbReport, arbPolicy, fc.boolean(), (r, report, p, cur) => {
        fc.pre(isFinished(r.state));
        const { run: after } = applyReport(r, report, { current: cur, policy: p, now: T });
        const reopen = report.kind === 'target' && report.state === 'running' && report.reopen === true;
        const found = r.state === 'lost' && report.kind === 'target' && report.state === 'succeeded';
        if (reopen) expect(after.state).toBe('running');
        else if (found) expect(after).toMatchObject({ state: 'succeeded', nextRetryAt: null, error: null });
        else expect(after).toEqual(r);
      }),
    );
  });

  it('a stale report (older attempt or generation) never schedules a retry and never reads as applied', () => {
    fc.assert(
      fc.property(arbRun, arbReport, arbPolicy, (r, report, p) => {
        const { effect, run: after } = applyReport(r, report, { current: false, policy: p, now: T });
        expect(effect).not.toBe('applied');
        if (effect === 'stale') expect(after.nextRetryAt).toBeNull();
      }),
    );
  });

  it('a current run is retried exactly when it finished unsuccessfully with retries left', () => {
    fc.assert(
      fc.property(arbRun, arbReport, arbPolicy, (r, report, p) => {
        fc.pre(isOpen(r.state));
        const { effect, run: after } = applyReport(r, report, { current: true, policy: p, now: T });
        if (effect !== 'applied') return;
        const owed = UNSUCCESSFUL_STATES.includes(after.state) && r.attempt <= p.retries;
        expect(after.nextRetryAt).toBe(owed ? T + retryDelayMs(p, r.attempt) : null);
      }),
    );
  });

  it('finishedAt is set exactly on finished runs, startedAt on every run that started', () => {
    fc.assert(
      fc.property(arbRun, fc.array(arbReport, { maxLength: 8 }), arbPolicy, (r, reports, p) => {
        let facts = r;
        let now = T;
        for (const report of reports) {
          now += 1000;
          facts = applyReport(facts, report, { current: true, policy: p, now }).run;
          expect(facts.finishedAt !== null).toBe(isFinished(facts.state));
          if (facts.state === 'started' || facts.state === 'running') expect(facts.startedAt).not.toBeNull();
        }
      }),
    );
  });

  it('matches a brute-force table of allowed moves', () => {
    // The model: from each state, which report kinds (target states by name) move it where.
    const model = (from: RunState, report: RunReport): RunState => {
      const open = from === 'pending' || from === 'started' || from === 'running';
      if (report.kind === 'delivered') return from === 'pending' ? 'started' : from;
      if (report.kind === 'refused') return from === 'pending' ? 'failed' : from;
      if (report.kind === 'timeout') return from === 'started' || from === 'running' ? 'timed_out' : from;
      if (open) return report.state;
      if (from === 'lost' && report.state === 'succeeded') return 'succeeded';
      return report.state === 'running' && report.reopen ? 'running' : from;
    };
    fc.assert(
      fc.property(arbRun, arbReport, fc.boolean(), (r, report, cur) => {
        const { run: after } = applyReport(r, report, { current: cur, policy, now: T });
        expect(after.state).toBe(model(r.state, report));
      }),
    );
  });
});

describe('retry timing', () => {
  it('doubles per attempt from the backoff', () => {
    expect([1, 2, 3, 4].map((a) => retryDelayMs(policy, a))).toEqual([60_000, 120_000, 240_000, 480_000]);
    expect(retryDelayMs(DEFAULT_RUN_POLICY, 1)).toBe(60_000);
  });

  it('grows exponentially and never shrinks, up to a day', () => {
    fc.assert(
      fc.property(arbPolicy, fc.integer({ min: 1, max: 60 }), (p, a) => {
        const d = retryDelayMs(p, a);
        const next = retryDelayMs(p, a + 1);
        expect(next).toBeGreaterThanOrEqual(d);
        expect(next === 2 * d || next === 86_400_000).toBe(true);
      }),
    );
  });
});

describe('run ids', () => {
  it('attempt 1 keeps the idempotency key; later attempts get ~aN', () => {
    expect(runId('orders_daily@20250601T000000Z#1', 1)).toBe('orders_daily@20250601T000000Z#1');
    expect(runId('orders_daily@20250601T000000Z#1', 2)).toBe('orders_daily@20250601T000000Z#1~a2');
    expect(parseRunId('orders_daily@20250601T000000Z#1~a2')).toEqual({
      idempotencyKey: 'orders_daily@20250601T000000Z#1',
      attempt: 2,
    });
  });

  it('round-trips and never contains a colon', () => {
    const key = fc.stringMatching(/^[A-Za-z0-9_.-]{1,20}@[0-9TZ]{1,16}#[1-9][0-9]{0,3}$/);
    fc.assert(
      fc.property(key, fc.integer({ min: 1, max: 10_000 }), (k, a) => {
        expect(parseRunId(runId(k, a))).toEqual({ idempotencyKey: k, attempt: a });
        expect(runId(k, a)).not.toContain(':');
      }),
    );
  });
});

describe('reading targets', () => {
  it('maps BullMQ job states', () => {
    expect(queueJobReport('completed', undefined)).toEqual({ kind: 'target', state: 'succeeded' });
    expect(queueJobReport('failed', { failedReason: 'boom' })).toMatchObject({
      state: 'failed',
      error: 'boom',
    });
    expect(queueJobReport('active', undefined)).toMatchObject({ state: 'running' });
    expect(queueJobReport('waiting', { attemptsMade: 0 })).toBeNull();
    expect(queueJobReport('delayed', undefined)).toMatchObject({ state: 'running' });
    expect(queueJobReport('waiting', { attemptsMade: 1 })).toMatchObject({ state: 'running' });
    expect(queueJobReport('unknown', undefined)).toMatchObject({ state: 'lost' });
  });

  it('maps Airflow dag run states', () => {
    expect(airflowRunReport('queued')).toMatchObject({ state: 'running', reopen: true });
    expect(airflowRunReport('running')).toMatchObject({ state: 'running', reopen: true });
    expect(airflowRunReport('success')).toMatchObject({ state: 'succeeded' });
    expect(airflowRunReport('failed')).toMatchObject({ state: 'failed' });
    expect(airflowRunReport('something_new')).toBeNull();
  });

  it('refuses a manual retry of an open or succeeded run', () => {
    expect(manualRetryRefusal(null)).toMatch(/no run/);
    expect(manualRetryRefusal('running')).toMatch(/still running/);
    expect(manualRetryRefusal('succeeded')).toMatch(/succeeded/);
    for (const s of UNSUCCESSFUL_STATES) expect(manualRetryRefusal(s)).toBeNull();
  });
});
