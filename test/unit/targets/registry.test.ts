/**
 * Every registered target type reaches every place that depends on the type: a place that lists
 * types by hand again (as the run metrics once did, without airflow_asset) fails here for the type
 * it forgot. Each type needs an example configuration below.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { COMMAND_HELP } from '../../../src/cli/help.js';
import { parseConfig } from '../../../src/config/index.js';
import { defineRollups } from '../../../src/config/rollups.js';
import { RunReportJson } from '../../../src/http/schemas/runs.js';
import { createMetrics } from '../../../src/metrics/registry.js';
import { firstCheckMs } from '../../../src/scheduler/dispatch.js';
import { nextCheckMs } from '../../../src/scheduler/follow-runs.js';
import {
  describeTarget,
  followRules,
  TARGET_NAMES,
  TARGET_TYPES,
  type TargetConfig,
  targetType,
} from '../../../src/targets/registry.js';
import { redactTarget, resolveTarget } from '../../../src/targets/secrets.js';
import type { JobQueues, TargetDeps } from '../../../src/targets/target.js';

/** A valid configuration of each type, with a literal secret where the type has any. */
const EXAMPLES: Readonly<Record<string, Record<string, unknown>>> = {
  queue: { type: 'queue', queue: 'backfills' },
  webhook: { type: 'webhook', url: 'https://hooks.example/run', headers: { Authorization: 'Bearer abcd' } },
  airflow: { type: 'airflow', url: 'https://airflow.example', dag_id: 'orders', token: 'tok-1234' },
  airflow_asset: {
    type: 'airflow_asset',
    url: 'https://airflow.example',
    asset: 'orders',
    token: 'tok-1234',
  },
  dagster: {
    type: 'dagster',
    url: 'https://dagster.example',
    asset_key: 'warehouse/orders',
    token: 'tok-1234',
  },
};

/** Nothing is sent: building a target only makes its handles. */
const queues: JobQueues = {
  backend: 'redis',
  queue: () => ({}) as ReturnType<JobQueues['queue']>,
  queueEvents: () =>
    ({ on: () => {}, close: async () => {} }) as unknown as ReturnType<JobQueues['queueEvents']>,
};
const deps: TargetDeps = { queues, defaultPrefix: 'bull', onFinished: () => {} };

/** The report sources run_reports' CHECK takes, as its newest migration states them. */
function storedSources(): string[] {
  const dir = join(import.meta.dirname, '../../../migrations');
  const checks = readdirSync(dir)
    .sort()
    .flatMap((file) => [
      ...readFileSync(join(dir, file), 'utf8').matchAll(/CHECK \(source IN \(([^)]*)\)\)/g),
    ]);
  return [...checks.at(-1)![1]!.matchAll(/'([a-z_]+)'/g)].map((m) => m[1]!);
}

/** The anchors of a page's headings, as GitHub makes them. */
function headingSlugs(markdown: string): string[] {
  return [...markdown.matchAll(/^#{1,6} (.+)$/gm)].map((m) =>
    m[1]!
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\p{M}\- _]/gu, '')
      .replace(/ /g, '-'),
  );
}

const configured = (type: string): TargetConfig =>
  parseConfig({
    rollups: [{ id: 'r', upstream: 'a', every: 'day', begin: '2025-01-01', target: EXAMPLES[type] }],
  }).rollups[0]!.target;

describe.each(TARGET_NAMES)('target type %s', (name) => {
  const type = targetType(name)!;

  it('has an example here, and the config accepts it as a rollup target and as a repair target', () => {
    expect(EXAMPLES[name], `add an example configuration of ${name} to this test`).toBeDefined();
    const config = parseConfig({
      rollups: [
        {
          id: 'r',
          upstream: 'a',
          every: 'day',
          begin: '2025-01-01',
          target: EXAMPLES[name],
          repair: { target: EXAMPLES[name] },
        },
      ],
    });
    expect(config.rollups[0]!.target.type).toBe(name);
    expect(config.rollups[0]!.repair!.target.type).toBe(name);
    expect(defineRollups(config)).toHaveLength(1);
  });

  it('builds a trigger target that can be asked about runs exactly when the type has runs to follow, and a repair target', () => {
    const resolved = resolveTarget(redactTarget(configured(name)), [configured(name)], {});
    const trigger = type.trigger(resolved, deps);
    expect(typeof trigger.deliver).toBe('function');
    expect(trigger.observe !== undefined).toBe(type.follow !== null);
    expect(typeof type.repair(resolved, deps).deliver).toBe('function');
  });

  it('stores no literal secret and gets it back from the live config', () => {
    const config = configured(name);
    const stored = redactTarget(config);
    expect(JSON.stringify(stored)).not.toContain('tok-1234');
    expect(JSON.stringify(stored)).not.toContain('Bearer abcd');
    expect(resolveTarget(stored, [config], {})).toEqual(config);
  });

  it('is followed as its rules say: first check, later checks, the source its reports are recorded under', () => {
    expect(followRules(name)).toEqual(type.follow);
    expect(firstCheckMs(name)).toBe(type.follow?.firstCheckMs ?? null);
    const open = { state: 'running' as const, startedAt: new Date(0), finishedAt: null };
    const next = nextCheckMs(name, open, { openMs: 2000, watchMs: 30_000 }, 3_600_000, 3_600_000);
    expect(next).toBe(type.follow?.thinOut ? 60_000 : 2000);
    if (type.follow) {
      const report = { at: '2026-01-01T00:00:00Z', state: 'succeeded', effect: 'applied', error: null };
      expect(RunReportJson.safeParse({ ...report, source: type.follow.source, version: null }).success).toBe(
        true,
      );
      expect(
        storedSources(),
        `a new report source needs a migration that widens run_reports_source_check`,
      ).toContain(type.follow.source);
    }
  });

  it('is named where the CLI tells a person about targets, with its documentation page and section', () => {
    expect(type.docs).toMatch(/^docs\/targets\/[a-z_]+\.md(#[a-z_-]+)?$/);
    const [page, anchor] = type.docs.split('#');
    const text = readFileSync(join(import.meta.dirname, '../../..', page!), 'utf8');
    if (anchor !== undefined) expect(headingSlugs(text)).toContain(anchor);
    expect(COMMAND_HELP.repair).toMatch(new RegExp(`^  ${name} +${type.docs}$`, 'm'));
    expect(describeTarget(configured(name))).toMatch(new RegExp(`^${name.split('_')[0]}`));
  });

  it('is a `target` label of every run metric, each series starting at 0, and its run ends are counted', async () => {
    const metrics = createMetrics();
    const text = await metrics.registry.metrics();
    for (const family of ['runs_total', 'run_duration_seconds_count', 'runs_given_up_total', 'runs_open'])
      expect(text).toMatch(
        new RegExp(`^coverage_rollup_${family}\\{target="${name}",state="[a-z_]+"\\} 0$`, 'm'),
      );
    const ended = {
      effect: 'applied' as const,
      current: true,
      before: { state: 'running' as const },
      after: { state: 'succeeded' as const, startedAt: 1_000, finishedAt: 3_000, nextRetryAt: null },
    };
    metrics.runReported(name, ended);
    expect(await metrics.registry.metrics()).toContain(
      `coverage_rollup_runs_total{target="${name}",state="succeeded"} 1`,
    );
  });

  it('declares secret fields its schema has', () => {
    const shape = (type.schema as unknown as { shape: Record<string, unknown> }).shape;
    for (const [field] of type.secrets.fields) expect(Object.keys(shape)).toContain(field);
  });
});

describe('the registry', () => {
  it('lists each type once, by the name its schema takes', () => {
    expect(new Set(TARGET_NAMES).size).toBe(TARGET_TYPES.length);
    for (const type of TARGET_TYPES) expect(type.schema.parse(EXAMPLES[type.type]).type).toBe(type.type);
  });
});
