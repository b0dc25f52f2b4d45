import { DateTime } from 'luxon';
import type { RunReport } from '../core/runs.js';
import type { RunIdentity, TriggerPayload } from '../core/trigger.js';
import { type ResolvedTarget, scrubSecrets } from './secrets.js';
import {
  type DeliveryResult,
  type Observation,
  type ObservedRun,
  postJson,
  resultOfStatus,
  type Target,
} from './target.js';

export type DagsterConfig = Omit<Extract<ResolvedTarget, { type: 'dagster' }>, 'type'>;

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

/** The path of a report endpoint: each key part URL-encoded, `/` between them (Dagster splits on it). */
export function reportPath(
  assetKey: readonly string[],
  event: 'materialization' | 'observation' = 'materialization',
): string {
  return `/report_asset_${event}/${assetKey.map(encodeURIComponent).join('/')}`;
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

/**
 * A Dagster webserver as both Dagster targets use it: its GraphQL and its report endpoints, with
 * the configured headers and token, every error scrubbed of them.
 */
export function dagsterClient(config: DagsterConfig) {
  const base = config.url.replace(/\/+$/, '');
  const headers: Record<string, string> = {
    // Dagster takes `application/json` exactly (postJson sets it): no header may replace it.
    ...Object.fromEntries(
      Object.entries(config.headers).filter(([name]) => name.toLowerCase() !== 'content-type'),
    ),
    ...(config.token !== undefined ? { 'Dagster-Cloud-Api-Token': config.token } : {}),
  };
  const secrets = [...Object.values(config.headers), ...(config.token !== undefined ? [config.token] : [])];
  const scrub = (text: string) => scrubSecrets(text, secrets);
  return {
    /** A GraphQL request's `data`, or an error (HTTP, not JSON, or GraphQL's own `errors`). */
    async graphql<T>(request: unknown): Promise<{ data: T } | { error: string }> {
      const response = await postJson(`${base}/graphql`, request, headers, config.timeout);
      if ('error' in response) return { error: scrub(response.error) };
      if (response.status !== 200)
        return { error: scrub(`GraphQL HTTP ${response.status}: ${response.text.slice(0, 300)}`) };
      let answer: { data?: T; errors?: Array<{ message?: string }> };
      try {
        answer = JSON.parse(response.text) as typeof answer;
      } catch {
        return { error: 'the GraphQL answer is not JSON' };
      }
      if (answer.errors?.length)
        return {
          error: scrub(
            `GraphQL: ${answer.errors
              .map((e) => e.message)
              .join('; ')
              .slice(0, 300)}`,
          ),
        };
      return { data: answer.data ?? ({} as T) };
    },
    /** POSTs a report (`/report_asset_materialization/...`, `/report_asset_observation/...`). */
    async report(path: string, body: unknown): Promise<DeliveryResult> {
      // Exactly `application/json`: Dagster refuses any other content type, charset included.
      const response = await postJson(`${base}${path}`, body, headers, config.timeout);
      if ('error' in response) return { ok: false, retry: true, error: scrub(response.error) };
      const result = resultOfStatus(response.status, response.text);
      return result.ok ? result : { ...result, error: scrub(result.error) };
    },
  };
}
