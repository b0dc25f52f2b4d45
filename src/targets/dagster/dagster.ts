/**
 * The `dagster` target type: a decision becomes a runless materialization of an asset in Dagster,
 * and a repair request attempt an observation of it (repair.ts).
 */
import { DateTime } from 'luxon';
import { z } from 'zod';
import type { RunReport } from '../../core/runs/runs.js';
import type { RunIdentity, TriggerPayload } from '../../core/runs/trigger.js';
import { isoDuration, nonEmpty, secret, targetUrl } from '../../support/fields.js';
import {
  type DeliveryResult,
  defineTarget,
  type Observation,
  type ObservedRun,
  type ResolvedConfig,
  type Target,
} from '../target.js';
import { dagsterClient, reportPath } from './client.js';
import { dagsterRepairTarget } from './repair.js';

/**
 * A Dagster asset key: Dagster's user string (`/` separates the parts: `warehouse/orders_hourly`)
 * or the list of its parts. Stored and used as the list.
 */
const dagsterAssetKey = z
  .union([z.string(), z.array(z.string())], {
    error: 'expected a string such as warehouse/orders or a list of key parts',
  })
  .transform((key) => (typeof key === 'string' ? key.split('/') : key))
  .refine((parts) => parts.length > 0 && parts.every((p) => p.trim() !== '' && p === p.trim()), {
    message: 'expected non-empty key parts without surrounding spaces, such as warehouse/orders',
  });

/** `POST /report_asset_materialization/{asset_key}` of a Dagster webserver. */
const schema = z.strictObject({
  type: z.literal('dagster'),
  /** The webserver (`http://dagster:3000`), or a Dagster+ deployment (`https://org.dagster.cloud/prod`). */
  url: targetUrl,
  asset_key: dagsterAssetKey,
  /**
   * The partition key as a luxon format of the period start in the rollup's zone, to match the
   * asset's partitions definition (Dagster's hourly keys are `yyyy-MM-dd-HH:mm`); default: the
   * period key (`2025-06-01` for a day, as Dagster's daily keys).
   */
  partition_format: nonEmpty.optional(),
  /** A Dagster+ user token, sent as `Dagster-Cloud-Api-Token`; open source Dagster needs none. */
  token: secret.optional(),
  headers: z.record(z.string(), secret).default({}),
  timeout: isoDuration.default(10_000),
});

export const dagsterType = defineTarget({
  type: 'dagster',
  docs: 'docs/targets/dagster.md',
  schema,
  secrets: {
    fields: [
      ['headers', 'secret map'],
      ['token', 'secret'],
    ],
    last: true,
  },
  // Dagster records a materialization before it answers the POST: asked at once, it says succeeded.
  follow: { source: 'dagster', firstCheckMs: 0, thinOut: false, watchFinished: false },
  trigger: (config) => dagsterTarget(config),
  repair: (config) => dagsterRepairTarget(config),
  describe: (config) => `dagster asset ${config.asset_key.join('/')}`,
  rollupProblem: (config, domain) =>
    domain === 'integer' && config.partition_format
      ? {
          field: 'target.partition_format',
          message: 'an integer rollup has no period start to format: its partition is the bucket start',
        }
      : undefined,
  repairProblems: (config) =>
    config.partition_format === undefined
      ? []
      : [
          {
            field: 'partition_format',
            message: 'a repair request is an observation of the asset, not of one partition: remove it',
          },
        ],
});

export type DagsterConfig = Omit<ResolvedConfig<typeof schema>, 'type'>;

/** Dagster's tag for a materialization's data version (`DATA_VERSION_TAG`). */
export const DATA_VERSION_TAG = 'dagster/data_version';

/**
 * Most materializations one look-up reads. The partitions asked about are few and each holds one
 * materialization per generation plus Dagster's own runs; a longer answer is cut here, and a
 * data version not in it counts as not seen (so not as lost).
 */
export const LOOKUP_LIMIT = 500;

/** The data version a decision materializes: one per (rollup, generation), whatever the attempt. */
export function dataVersion(payload: RunIdentity): string {
  return `${payload.rollup}#${payload.generation}`;
}

/**
 * The Dagster partition key of a decision: the period key, or the period start formatted in the
 * rollup's zone (its offset is in the start's text) with `partition_format`.
 */
export function partitionKey(payload: RunIdentity, format: string | undefined): string {
  if (format === undefined || typeof payload.period.start !== 'string') return payload.period.key;
  const start = DateTime.fromISO(payload.period.start, { setZone: true });
  if (!start.isValid) return payload.period.key;
  return start.toFormat(format);
}

/** The JSON body of `POST /report_asset_materialization/{asset_key}` for a decision. */
export function materializationBody(payload: TriggerPayload, format: string | undefined) {
  return {
    partition: partitionKey(payload, format),
    data_version: dataVersion(payload),
    description: `coverage-rollup: ${payload.rollup} period ${payload.period.key}, generation ${payload.generation} (${payload.reason})`,
    metadata: {
      rollup: payload.rollup,
      idempotency_key: payload.idempotency_key,
      generation: payload.generation,
      reason: payload.reason,
      period_start: String(payload.period.start),
      period_end: String(payload.period.end),
      period_key: payload.period.key,
      decided_at: payload.decided_at,
      run_id: payload.run_id,
      attempt: payload.attempt,
      // The coverage of every upstream: ratio, missing ranges, replay requirements, versions.
      upstreams: payload.upstreams,
    },
  };
}

const MATERIALIZATIONS_QUERY = `query CoverageRollupMaterializations($assetKey: AssetKeyInput!, $partitions: [String!], $limit: Int) {
  assetOrError(assetKey: $assetKey) {
    __typename
    ... on Asset { assetMaterializations(partitions: $partitions, limit: $limit) { partition tags { key value } } }
    ... on AssetNotFoundError { message }
  }
}`;

/** The GraphQL request that reads the materializations of some partitions of an asset. */
export function lookupRequest(assetKey: readonly string[], partitions: readonly string[]) {
  return {
    query: MATERIALIZATIONS_QUERY,
    variables: { assetKey: { path: [...assetKey] }, partitions: [...partitions], limit: LOOKUP_LIMIT },
  };
}

interface Materialization {
  readonly partition: string | null;
  readonly tags: ReadonlyArray<{ key: string; value: string }>;
}

/** (partition, data version) pairs Dagster holds, and whether the answer was cut at the limit. */
interface Recorded {
  readonly seen: ReadonlySet<string>;
  readonly truncated: boolean;
}

const pair = (partition: string | null, version: string) => JSON.stringify([partition, version]);

/**
 * Reports a decision to Dagster as a runless materialization of `asset_key`:
 * `partition` is the period key (or `partition_format` of its start), `data_version` is
 * `{rollup}#{generation}`, and the coverage goes into the metadata, so a Dagster asset, sensor or
 * automation condition downstream can run on it.
 *
 * Dagster deduplicates nothing (every POST is one more materialization), so before posting the
 * target reads the partition's materializations over GraphQL and posts only when none has our
 * data version: a redelivery (a crash before the delivery was recorded, a timeout after Dagster
 * had recorded it, a retried attempt) adds nothing. The look-up and the POST are two requests, so
 * two deliveries of one decision at the same instant could both post; the scheduler never sends
 * those, it delivers a run from one lease holder and only again after the earlier delivery ended.
 *
 * The run succeeds when Dagster holds the materialization: the scheduler asks (observe) right after
 * the delivery, by the same look-up; one Dagster no longer has (a wiped instance) is lost.
 */
export function dagsterTarget(config: DagsterConfig): Target {
  const client = dagsterClient(config);

  async function recorded(partitions: readonly string[]): Promise<Recorded | { error: string }> {
    const answer = await client.graphql<{
      assetOrError?: { __typename?: string; assetMaterializations?: Materialization[] };
    }>(lookupRequest(config.asset_key, partitions));
    if ('error' in answer) return answer;
    const asset = answer.data.assetOrError;
    if (asset?.__typename !== 'Asset') return { seen: new Set(), truncated: false };
    const list = asset.assetMaterializations ?? [];
    const seen = new Set<string>();
    for (const m of list) {
      const version = m.tags.find((t) => t.key === DATA_VERSION_TAG)?.value;
      if (version !== undefined) seen.add(pair(m.partition, version));
    }
    return { seen, truncated: list.length >= LOOKUP_LIMIT };
  }

  return {
    async deliver(payload: TriggerPayload): Promise<DeliveryResult> {
      const body = materializationBody(payload, config.partition_format);
      const before = await recorded([body.partition]);
      if ('error' in before) return { ok: false, retry: true, error: before.error };
      if (before.seen.has(pair(body.partition, body.data_version))) return { ok: true };
      return client.report(reportPath(config.asset_key), body);
    },

    async observe(runs: readonly ObservedRun[]): Promise<Observation | { error: string }> {
      if (runs.length === 0) return new Map();
      const wanted = runs.map((r) => ({
        runId: r.runId,
        partition: partitionKey(r.payload, config.partition_format),
        version: dataVersion(r.payload),
      }));
      const answer = await recorded([...new Set(wanted.map((w) => w.partition))]);
      if ('error' in answer) return answer;
      const out = new Map<string, RunReport | null>();
      for (const w of wanted) {
        if (answer.seen.has(pair(w.partition, w.version)))
          out.set(w.runId, { kind: 'target', state: 'succeeded' });
        else if (answer.truncated) out.set(w.runId, null);
        else
          out.set(w.runId, {
            kind: 'target',
            state: 'lost',
            error: `Dagster has no materialization of ${config.asset_key.join('/')} partition ${w.partition} with data version ${w.version}`,
          });
      }
      return out;
    },

    close: async () => {},
  };
}
