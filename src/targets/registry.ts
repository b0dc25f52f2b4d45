/**
 * The target types, one line each. Everything else that depends on the type reads this list: the
 * config's `target:` schema, delivery and repair delivery (targets.ts), run following
 * (scheduler/dispatch.ts, scheduler/follow-runs.ts), the `target` label set of the run metrics,
 * the `source` of recorded run reports (store and API) and the CLI's help.
 */
import { z } from 'zod';
import { airflowAssetType } from './airflow/asset.js';
import { airflowType } from './airflow/dag-runs.js';
import { dagsterType } from './dagster/dagster.js';
import { queueType } from './queue.js';
import type { FollowRules, TargetType } from './target.js';
import { webhookType } from './webhook.js';

export const TARGET_TYPES = [queueType, webhookType, airflowType, airflowAssetType, dagsterType] as const;

type Registered = (typeof TARGET_TYPES)[number];
export type TargetName = Registered['type'];
export const TARGET_NAMES: readonly TargetName[] = TARGET_TYPES.map((t) => t.type);

/** The `source` a followed type's answers are recorded under (`airflow` for both Airflow types). */
export type TargetReportSource = NonNullable<Registered['follow']>['source'];
export const TARGET_REPORT_SOURCES: readonly TargetReportSource[] = [
  ...new Set(TARGET_TYPES.flatMap((t): TargetReportSource[] => (t.follow ? [t.follow.source] : []))),
];

type SchemasOf<T extends readonly unknown[]> = {
  -readonly [K in keyof T]: T[K] extends { schema: infer S } ? S : never;
};

/** A rollup's `target:` (and its `repair.target:`): one of the types, by `type`. */
export const targetSchema = z.discriminatedUnion(
  'type',
  // The tuple of the types' schemas, in order: map() only loses the tuple's type.
  TARGET_TYPES.map((t) => t.schema) as unknown as SchemasOf<typeof TARGET_TYPES>,
);

/** A target as configured: secrets as written (literal, or `{env: NAME}`). */
export type TargetConfig = z.output<typeof targetSchema>;

const byName: ReadonlyMap<string, TargetType> = new Map(TARGET_TYPES.map((t) => [t.type, t as TargetType]));

/**
 * The type of a configured or stored target; undefined for a name no registered type has (a
 * stored target is only ever of a type registered when it was stored). Its members take any
 * config of the type: the caller passes the config whose `type` it looked up.
 */
export function targetType(name: string): TargetType | undefined {
  return byName.get(name);
}

/** Where a delivery to this target goes, as an operator would look for it: the queue, DAG or asset by name. */
export function describeTarget(config: TargetConfig): string {
  return targetType(config.type)?.describe(config) ?? config.type;
}

const followByName: ReadonlyMap<string, FollowRules<TargetReportSource> | null> = new Map(
  TARGET_TYPES.map((t) => [t.type, t.follow]),
);

/** How runs of a type are followed; null for a type with nothing to follow (or none of this name). */
export function followRules(name: string): FollowRules<TargetReportSource> | null {
  return followByName.get(name) ?? null;
}
