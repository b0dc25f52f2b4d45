/**
 * What operators load as they are: `/metrics` passes `promtool check metrics` with no warning and
 * starts every closed label set at 0; the alert rules in examples/prometheus pass `promtool test
 * rules`; the Grafana dashboard plots the queries the alerts read. Debian's `prometheus` package
 * provides promtool (.ci/run installs it, as it installs Chromium).
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { BAD_INPUT_REASONS } from '../../src/core/errors.js';
import { startDaemon } from '../../src/daemon/daemon.js';
import { MISNAMED_DEFAULTS } from '../../src/metrics/registry.js';
import { createLogger } from '../../src/support/log.js';
import { packageRoot } from '../../src/support/paths.js';
import { testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';

const PROMTOOL = process.env.PROMTOOL ?? '/usr/bin/promtool';
const hasPromtool = existsSync(PROMTOOL);
if (!hasPromtool)
  console.warn(`prometheus tests skipped: ${PROMTOOL} is missing (apt-get install -y prometheus)`);
const examples = join(packageRoot(), 'examples', 'prometheus');

/** Runs promtool; answers its exit code and everything it printed. */
function promtool(args: string[], stdin?: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const child = execFile(PROMTOOL, args, { cwd: examples, timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
      resolve({ code, output: `${stdout}${stderr}`.trim() });
    });
    child.stdin?.end(stdin ?? '');
  });
}

describe.skipIf(!hasPromtool)('/metrics as Prometheus reads it', () => {
  // In a hook, not in the body: vitest runs a skipped suite's body (to list its tests) but none of
  // its hooks, so a database and a daemon made there were left behind when promtool is missing.
  let text = '';
  beforeAll(async () => {
    const db = await createTestDatabase();
    const config = testConfig(db, createTestPrefix(), {
      rollups: [
        {
          id: 'prom_hourly',
          upstream: ['prom.orders'],
          every: 'hour',
          begin: '2026-01-01',
          policy: { deadline: 'PT1H', on_deadline: 'miss' },
          target: { type: 'queue', queue: 'prom-runs' },
        },
      ],
    });
    const daemon = await startDaemon(config, createLogger(config.log_level));
    try {
      text = (await daemon.http.inject({ url: '/metrics' })).body;
    } finally {
      await daemon.stop();
    }
  });

  it('passes promtool check metrics with no warning at all', async () => {
    expect(await promtool(['check', 'metrics'], text)).toEqual({ code: 0, output: '' });
    for (const name of MISNAMED_DEFAULTS) expect(text).not.toContain(name);
    expect(text).toContain('process_cpu_seconds_total'); // the other process metrics stay
  });

  it('starts every closed label set at 0, before anything happened', () => {
    const zero = (series: string) =>
      expect(text, series).toMatch(new RegExp(`^${escapeRegExp(series)} 0$`, 'm'));
    for (const reason of BAD_INPUT_REASONS) zero(`coverage_rollup_events_rejected_total{reason="${reason}"}`);
    zero('coverage_rollup_events_ingested_total{status="duplicate"}');
    zero('coverage_rollup_periods_missed_total{rollup="prom_hourly"}');
    zero('coverage_rollup_triggers_total{rollup="prom_hourly",reason="covered",target="queue"}');
    zero('coverage_rollup_triggers_total{rollup="prom_hourly",reason="deadline",target="queue"}');
    zero('coverage_rollup_deliveries_total{target="queue",result="failed"}');
    zero('coverage_rollup_lease_renewals_total{result="failed"}');
    zero('coverage_rollup_pruned_total{what="events"}');
  });

  it('times scheduler passes with a histogram, which sums across instances', () => {
    expect(text).toContain('# TYPE coverage_rollup_scheduler_pass_seconds histogram');
    expect(text).toMatch(/^coverage_rollup_scheduler_pass_seconds_bucket\{le="0\.01",work="idle"\} \d+$/m);
    expect(text).not.toContain('quantile=');
  });
});

describe.skipIf(!hasPromtool)('examples/prometheus: alert rules and the dashboard', () => {
  it('the rules load, and pass their promtool unit tests', async () => {
    expect(await promtool(['check', 'rules', 'alerts.yml'])).toMatchObject({ code: 0 });
    const tested = await promtool(['test', 'rules', 'alerts.test.yml']);
    expect(tested.output).toContain('SUCCESS');
    expect(tested.code).toBe(0);
  });

  it('a broken expectation fails promtool test rules (so the test above can fail)', async () => {
    const { code } = await promtool(['test', 'rules', '/dev/stdin'], brokenTests());
    expect(code).not.toBe(0);
  });

  it('has a unit test for every alert, and a dashboard panel for every query an alert reads', () => {
    const rules = parseYaml(readFileSync(join(examples, 'alerts.yml'), 'utf8')).groups.flatMap(
      (g: { rules: unknown[] }) => g.rules,
    ) as { alert: string; expr: string }[];
    const tests = readFileSync(join(examples, 'alerts.test.yml'), 'utf8');
    const dashboard = JSON.parse(readFileSync(join(examples, 'dashboard.json'), 'utf8'));
    const queries: string[] = dashboard.panels.flatMap((p: { targets: { expr: string }[] }) =>
      p.targets.map((t) => t.expr),
    );
    expect(rules.length).toBeGreaterThanOrEqual(9);
    for (const { alert, expr } of rules) {
      expect(tests, alert).toMatch(new RegExp(`alertname: ${alert}\\b[^\\n]*\\n\\s+exp_alerts:\\n\\s+- `));
      const simple = /^(.*\S)\s*(?:==|>|<|>=|<=)\s*[\d.]+$/.exec(expr)?.[1];
      if (simple && !/ or /.test(expr)) expect(queries, alert).toContain(simple);
      for (const metric of expr.match(/coverage_rollup_[a-z_]+/g) ?? [])
        expect(
          queries.some((q) => q.includes(metric.replace(/_(bucket|count|sum)$/, ''))),
          `${alert}: ${metric}`,
        ).toBe(true);
    }
  });
});

/** The rules' tests with one expected alert label changed. */
function brokenTests(): string {
  const text = readFileSync(join(examples, 'alerts.test.yml'), 'utf8').replace(
    'rule_files: [alerts.yml]',
    `rule_files: [${join(examples, 'alerts.yml')}]`,
  );
  return text.replace('asset: warehouse.orders', 'asset: warehouse.nothing');
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
