import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/metrics.js';

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
