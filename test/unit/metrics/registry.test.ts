import { describe, expect, it } from 'vitest';
import type { RunState } from '../../../src/core/runs/runs.js';
import { createMetrics } from '../../../src/metrics/registry.js';
import {
  OPEN_RUN_STATES,
  type ReportedRun,
  RUN_OUTCOMES,
  RUN_TARGET_TYPES,
} from '../../../src/metrics/runs.js';

describe('coverage_rollup_decision_latency_seconds', () => {
  it('has a finite bucket within a factor of 3 of any latency from 5 ms to a day', async () => {
    const metrics = createMetrics();
    const { values } = await metrics.decisionSeconds.get();
    const bounds = values
      .filter((v) => v.metricName === 'coverage_rollup_decision_latency_seconds_bucket')
      .map((v) => Number(v.labels.le))
      .filter(Number.isFinite);
    for (let seconds = 0.005; seconds <= 86_400; seconds *= 1.1) {
      const bucket = bounds.find((le) => le >= seconds);
      expect(bucket, `latency ${seconds} s`).toBeDefined();
      expect(bucket!, `latency ${seconds} s`).toBeLessThanOrEqual(3 * seconds);
    }
  });

  it('counts a PT30S settle and a PT6H deadline in finite buckets, not +Inf', async () => {
    const metrics = createMetrics();
    metrics.decisionSeconds.observe(30.4);
    metrics.decisionSeconds.observe(6 * 3600 + 12);
    const { values } = await metrics.decisionSeconds.get();
    const count = (le: string) =>
      values.find((v) => v.metricName?.endsWith('_bucket') && String(v.labels.le) === le)?.value;
    expect([count('30'), count('60'), count('21600'), count('43200'), count('+Inf')]).toEqual([
      0, 1, 1, 2, 2,
    ]);
  });
});

describe('run metrics', () => {
  const series = async (metrics: ReturnType<typeof createMetrics>, name: string) =>
    (await metrics.registry.getSingleMetricAsString(name)).split('\n').filter((l) => !l.startsWith('#'));

  it('start every target × outcome at 0, with no rollup label', async () => {
    const metrics = createMetrics();
    const runs = await series(metrics, 'coverage_rollup_runs_total');
    expect(runs).toHaveLength(RUN_TARGET_TYPES.length * RUN_OUTCOMES.length);
    for (const target of RUN_TARGET_TYPES)
      for (const state of RUN_OUTCOMES)
        expect(runs).toContain(`coverage_rollup_runs_total{target="${target}",state="${state}"} 0`);
    const givenUp = await series(metrics, 'coverage_rollup_runs_given_up_total');
    expect(givenUp).toHaveLength(RUN_TARGET_TYPES.length * (RUN_OUTCOMES.length - 1));
    const counts = await series(metrics, 'coverage_rollup_run_duration_seconds');
    expect(counts.filter((l) => l.includes('_count{'))).toHaveLength(
      RUN_TARGET_TYPES.length * RUN_OUTCOMES.length,
    );
    expect((await series(metrics, 'coverage_rollup_runs_open')).every((l) => l.endsWith(' 0'))).toBe(true);
    expect(
      [...runs, ...counts, ...givenUp].filter((l) => l.includes('rollup=') || l.includes('period=')),
    ).toEqual([]);
  });

  it('keep the label sets closed however many rollups and periods end runs', async () => {
    const metrics = createMetrics();
    for (let i = 0; i < 1000; i++)
      metrics.runEnded({
        target: RUN_TARGET_TYPES[i % 3]!,
        state: RUN_OUTCOMES[i % 4]!,
        seconds: i,
        final: i % 2 === 0,
      });
    const runs = await series(metrics, 'coverage_rollup_runs_total');
    expect(runs).toHaveLength(RUN_TARGET_TYPES.length * RUN_OUTCOMES.length);
    const total = runs.reduce((n, line) => n + Number(line.split(' ').at(-1)), 0);
    expect(total).toBe(1000);
  });

  it('count a run given up on only when it failed for good, and time only runs that started', async () => {
    const metrics = createMetrics();
    metrics.runEnded({ target: 'queue', state: 'failed', seconds: 12, final: false });
    metrics.runEnded({ target: 'queue', state: 'failed', seconds: 40, final: true });
    metrics.runEnded({ target: 'queue', state: 'succeeded', seconds: 3, final: true });
    metrics.runEnded({ target: 'webhook', state: 'lost', seconds: null, final: true });
    /** The value of one series: `family` as registered, `line` the series name the line starts with. */
    const value = async (family: string, line: string) =>
      Number(
        (await series(metrics, family))
          .find((l) => l.startsWith(`${line} `))
          ?.split(' ')
          .at(-1),
      );
    expect(
      await value('coverage_rollup_runs_total', 'coverage_rollup_runs_total{target="queue",state="failed"}'),
    ).toBe(2);
    expect(
      await value(
        'coverage_rollup_runs_given_up_total',
        'coverage_rollup_runs_given_up_total{target="queue",state="failed"}',
      ),
    ).toBe(1);
    expect(
      await value(
        'coverage_rollup_runs_given_up_total',
        'coverage_rollup_runs_given_up_total{target="webhook",state="lost"}',
      ),
    ).toBe(1);
    expect(
      await value(
        'coverage_rollup_run_duration_seconds',
        'coverage_rollup_run_duration_seconds_count{target="queue",state="failed"}',
      ),
    ).toBe(2);
    expect(
      await value(
        'coverage_rollup_run_duration_seconds',
        'coverage_rollup_run_duration_seconds_count{target="webhook",state="lost"}',
      ),
    ).toBe(0);
    expect(
      await value('coverage_rollup_runs_total', 'coverage_rollup_runs_total{target="webhook",state="lost"}'),
    ).toBe(1);
  });

  it('read open runs from their source at scrape time, zero for states with none', async () => {
    const metrics = createMetrics();
    metrics.setOpenRunSource(async () => [{ target: 'airflow', state: 'running', count: 7 }]);
    const open = await series(metrics, 'coverage_rollup_runs_open');
    expect(open).toContain('coverage_rollup_runs_open{target="airflow",state="running"} 7');
    expect(open).toContain('coverage_rollup_runs_open{target="queue",state="pending"} 0');
    expect(open).toHaveLength(RUN_TARGET_TYPES.length * OPEN_RUN_STATES.length);
  });

  it('count a report only when it ends an open run, and give up only on the current run without a retry', async () => {
    const metrics = createMetrics();
    const run = (state: RunState, extra: Partial<ReportedRun['after']> = {}) => ({
      state,
      startedAt: 1_000,
      finishedAt: 31_000,
      nextRetryAt: null,
      ...extra,
    });
    const report = (
      before: RunState,
      after: ReportedRun['after'],
      effect: ReportedRun['effect'] = 'applied',
      current = true,
    ) => metrics.runReported('airflow', { effect, current, before: { state: before }, after });
    report('running', run('succeeded')); // counted, 30 s
    report('started', run('failed', { nextRetryAt: 99_000 })); // counted, retried: not given up
    report('started', run('failed'), 'stale', false); // an older attempt: counted, not given up
    report('pending', run('failed')); // refused delivery: counted and given up, not timed
    report('succeeded', run('running')); // a reopen: nothing
    report('failed', run('failed'), 'unchanged'); // nothing
    report('succeeded', run('failed'), 'refused'); // nothing
    report('pending', run('started')); // a start: nothing
    metrics.runReported('airflow', null); // no such run: nothing
    metrics.runReported('carrier-pigeon', {
      effect: 'applied',
      current: true,
      before: { state: 'running' },
      after: run('lost'),
    });
    const lines = [
      ...(await series(metrics, 'coverage_rollup_runs_total')),
      ...(await series(metrics, 'coverage_rollup_runs_given_up_total')),
      ...(await series(metrics, 'coverage_rollup_run_duration_seconds')),
    ].filter((l) => l.includes('target="airflow"') && !l.endsWith(' 0'));
    expect(lines).toEqual(
      expect.arrayContaining([
        'coverage_rollup_runs_total{target="airflow",state="succeeded"} 1',
        'coverage_rollup_runs_total{target="airflow",state="failed"} 3',
        'coverage_rollup_runs_given_up_total{target="airflow",state="failed"} 1',
        'coverage_rollup_run_duration_seconds_sum{target="airflow",state="succeeded"} 30',
        'coverage_rollup_run_duration_seconds_count{target="airflow",state="failed"} 2',
      ]),
    );
    expect(lines.filter((l) => l.includes('runs_total') || l.includes('given_up'))).toHaveLength(3);
    expect(await series(metrics, 'coverage_rollup_runs_total')).toHaveLength(
      RUN_TARGET_TYPES.length * RUN_OUTCOMES.length,
    ); // no series for a target type outside the closed set
  });
});
