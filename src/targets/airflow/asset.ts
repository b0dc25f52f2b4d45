/**
 * The `airflow_asset` target type: a decision becomes a partitioned asset event in Airflow 3, and
 * Airflow's own scheduler runs the DAGs scheduled on the asset; a repair request attempt becomes
 * an asset event without a partition.
 */
import { z } from 'zod';
import { airflowRunReport, type RunReport } from '../../core/runs/runs.js';
import type { RunIdentity } from '../../core/runs/trigger.js';
import { isoDuration, nonEmpty, targetUrl } from '../../support/fields.js';
import { scrubSecrets } from '../requests.js';
import {
  defineTarget,
  type Observation,
  type ObservedRun,
  type RepairTarget,
  type ResolvedConfig,
  type Target,
} from '../target.js';
import { airflowAssetEvents, type Json, parse } from './asset-events.js';
import {
  checkCredentials,
  credentialFields,
  credentialSecrets,
  ianaZone,
  partitionFormat,
} from './config.js';
import { periodPartitionKey } from './partition-key.js';

/** `partition_timezone` defaults to the rollup's zone (withRollupDefaults). */
const schema = z
  .strictObject({
    type: z.literal('airflow_asset'),
    url: targetUrl,
    asset: nonEmpty.optional(),
    asset_uri: nonEmpty.optional(),
    ...credentialFields,
    timeout: isoDuration.default(10_000),
    partition_key_format: partitionFormat.default('%Y-%m-%dT%H:%M:%S'),
    partition_timezone: ianaZone.optional(),
    follow_dag_id: nonEmpty.optional(),
  })
  .superRefine((t, ctx) => {
    if ((t.asset === undefined) === (t.asset_uri === undefined))
      ctx.addIssue({
        code: 'custom',
        path: ['asset'],
        message: "give the asset's name (asset) or its URI (asset_uri), one of them",
      });
    checkCredentials(t, ctx);
  });

export const airflowAssetType = defineTarget({
  type: 'airflow_asset',
  docs: 'docs/targets/airflow.md#the-airflow_asset-target',
  schema,
  secrets: credentialSecrets,
  // Without follow_dag_id, asking says succeeded once Airflow holds the event.
  follow: { source: 'airflow', firstCheckMs: 1000, thinOut: false, watchFinished: false },
  trigger: (config) => airflowAssetTarget(config),
  repair: (config) => airflowAssetRepairTarget(config),
  describe: (config) => `airflow asset ${config.asset ?? config.asset_uri}`,
  rollupProblem: (_config, domain) =>
    domain === 'integer'
      ? { field: 'target', message: 'an airflow target needs a time rollup (a data interval of instants)' }
      : undefined,
  repairProblems: (config) =>
    config.follow_dag_id === undefined
      ? []
      : [
          {
            field: 'follow_dag_id',
            message:
              'a repair request is followed by what the index then covers, not by a DAG run: remove it',
          },
        ],
  // A partition key is wall-clock time in the rollup's zone unless the target names another.
  withRollupDefaults: (config, rollup) =>
    config.partition_timezone === undefined ? { ...config, partition_timezone: rollup.timezone } : config,
});

export type AirflowAssetConfig = Omit<ResolvedConfig<typeof schema>, 'type'>;

/** The key a decision's asset event carries in `extra`: the run id (attempt N > 1 has its own). */
const eventKey = (payload: RunIdentity) => payload.run_id ?? payload.idempotency_key;
const isEventOf = (payload: RunIdentity) => (extra: Json | undefined) =>
  (extra?.run_id ?? extra?.idempotency_key) === eventKey(payload);

/**
 * The `airflow_asset` target: a decision becomes an asset event,
 * `POST /api/v2/assets/events` with the asset's id (looked up once by name or URI), the period's
 * `partition_key` (partition-key.ts) and the payload in `extra`, so Airflow's own scheduler runs
 * the DAGs scheduled on the asset for that partition. A redelivery first looks for its event
 * (`extra.run_id`, among the asset's events since the decision) and never posts a second one
 * (asset-events.ts); a run's first delivery posts at once. Without `follow_dag_id` the run
 * succeeds once Airflow accepted the event; with it, the run's outcome is that DAG's run created from the event (the event's
 * `created_dagruns`).
 */
export function airflowAssetTarget(config: AirflowAssetConfig, now: () => number = Date.now): Target {
  const events = airflowAssetEvents(config, now);
  /** The followed DAG's run of each event once known (by the event's run id), bounded. */
  const followed = new Map<string, string>();

  return {
    async deliver(payload, context) {
      const used: string[] = [];
      const result = await events.sendOnce(
        {
          extra: payload,
          partitionKey: periodPartitionKey(payload, config),
          isOurs: isEventOf(payload),
          since: payload.decided_at,
          first: context?.first,
        },
        used,
      );
      return result.ok ? result : { ...result, error: scrubSecrets(result.error, used) };
    },
    observe:
      config.follow_dag_id === undefined ? acceptedIsDone : (runs) => follow(runs, config.follow_dag_id!),
    close: async () => {},
  };

  async function acceptedIsDone(runs: readonly ObservedRun[]): Promise<Observation> {
    return new Map(runs.map((r) => [r.runId, { kind: 'target', state: 'succeeded' } as RunReport]));
  }

  /** Each run's event, then the followed DAG's run created from it (or for its partition). */
  async function follow(
    runs: readonly ObservedRun[],
    dagId: string,
  ): Promise<Observation | { error: string }> {
    const used: string[] = [];
    const id = await events.resolve(used);
    if (typeof id !== 'number') return { error: id.ok ? 'unreachable' : id.error };
    const out = new Map<string, RunReport | null>();
    for (const r of runs) {
      let runId = followed.get(eventKey(r.payload));
      if (runId === undefined) {
        const found = await events.find(id, isEventOf(r.payload), r.payload.decided_at, used);
        if ('error' in found) return { error: scrubSecrets(found.error, used) };
        if (!found.event) {
          out.set(r.runId, {
            kind: 'target',
            state: 'lost',
            error: `Airflow has no asset event for ${eventKey(r.payload)}`,
          });
          continue;
        }
        const created = ((found.event.created_dagruns ?? []) as Json[]).filter((d) => d.dag_id === dagId);
        runId = created.at(-1)?.run_id as string | undefined;
        if (runId === undefined) {
          out.set(r.runId, null); // not scheduled yet
          continue;
        }
        // Later checks ask only for the run: one request per run, not two.
        if (followed.size >= 10_000) followed.delete(followed.keys().next().value!);
        followed.set(eventKey(r.payload), runId);
      }
      const run = await events.get(
        `/api/v2/dags/${encodeURIComponent(dagId)}/dagRuns/${encodeURIComponent(runId)}`,
        used,
      );
      if ('error' in run) return { error: scrubSecrets(run.error, used) };
      if (run.status !== 200) {
        out.set(r.runId, null);
        continue;
      }
      out.set(r.runId, airflowRunReport(String(parse(run.text)?.state)));
    }
    return out;
  }
}

/**
 * An asset event with the request in `extra` and no partition key: a request names ranges of an
 * upstream, not a partition of the asset, so a backfill DAG scheduled on the asset (a plain
 * `schedule=[Asset(...)]`) runs on it and reads it from `triggering_asset_events`. A redelivery
 * finds the attempt's event by `extra.idempotency_key` and posts no second one.
 */
function airflowAssetRepairTarget(config: AirflowAssetConfig): RepairTarget {
  const events = airflowAssetEvents(config);
  return {
    async deliver(payload) {
      const used: string[] = [];
      const result = await events.sendOnce(
        {
          extra: payload,
          isOurs: (extra) => extra?.idempotency_key === payload.idempotency_key,
          since: payload.requested_at,
        },
        used,
      );
      return result.ok ? result : { ...result, error: scrubSecrets(result.error, used) };
    },
    close: async () => {},
  };
}
