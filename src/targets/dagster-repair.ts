/**
 * A repair request sent to Dagster: a runless **observation** of the target's
 * `asset_key`, `POST /report_asset_observation/{asset_key}`, with the request's fields as the
 * observation's metadata. An observation records something about an asset without claiming it
 * changed, which is what a request is: a materialization would tell Dagster data exists that
 * does not yet. No `data_version` either: Dagster reads an observed data version as the asset's
 * own and would mark what depends on it stale. A sensor in the producer's code location reads the
 * observations and launches the backfill (examples/dagster/defs.py).
 *
 * Dagster deduplicates nothing, so, as for materializations, a delivery first reads the asset's
 * observations since the attempt was made and posts only when none carries its idempotency key.
 */
import type { RepairPayload } from '../core/repair-payload.js';
import { type DagsterConfig, dagsterClient, reportPath } from './dagster.js';
import type { DeliveryResult } from './target.js';

/** Most observations one look-up reads; a request attempt is one observation. */
export const OBSERVATION_LOOKUP_LIMIT = 500;

/** The JSON body of `POST /report_asset_observation/{asset_key}` for an attempt. */
export function observationBody(payload: RepairPayload) {
  const where = payload.rollup === null ? 'by hand' : `for ${payload.rollup} period ${payload.period?.key}`;
  return {
    description: `coverage-rollup repair request ${payload.idempotency_key}: ${payload.ranges.length} range(s) of ${payload.asset}, ${where}`,
    // Every field of the request as the repair payload names it, the nulls of a request made by hand
    // (rollup, period) included: Dagster keeps them as null metadata values.
    metadata: payload,
  };
}

const OBSERVATIONS_QUERY = `query CoverageRollupRepairObservations($assetKey: AssetKeyInput!, $after: String, $limit: Int) {
  assetOrError(assetKey: $assetKey) {
    __typename
    ... on Asset { assetObservations(afterTimestampMillis: $after, limit: $limit) { metadataEntries { label ... on TextMetadataEntry { text } } } }
  }
}`;

/** The GraphQL request that reads an asset's observations since `sinceMs`. */
export function observationsRequest(assetKey: readonly string[], sinceMs: number) {
  return {
    query: OBSERVATIONS_QUERY,
    variables: {
      assetKey: { path: [...assetKey] },
      after: String(sinceMs),
      limit: OBSERVATION_LOOKUP_LIMIT,
    },
  };
}

interface Observation {
  readonly metadataEntries: ReadonlyArray<{ label: string; text?: string }>;
}

export function dagsterRepairTarget(config: DagsterConfig) {
  const client = dagsterClient(config);
  const where = config.asset_key.join('/');
  return {
    async deliver(payload: RepairPayload): Promise<DeliveryResult> {
      // From a second before the attempt was made: Dagster stamps the observation with its clock.
      const since = Date.parse(payload.requested_at) - 1_000;
      const answer = await client.graphql<{
        assetOrError?: { __typename?: string; assetObservations?: Observation[] };
      }>(observationsRequest(config.asset_key, since));
      if ('error' in answer) return { ok: false, retry: true, error: answer.error };
      const asset = answer.data.assetOrError;
      const list = asset?.__typename === 'Asset' ? (asset.assetObservations ?? []) : [];
      const ours = (o: Observation) =>
        o.metadataEntries.some((e) => e.label === 'idempotency_key' && e.text === payload.idempotency_key);
      if (list.some(ours)) return { ok: true };
      if (list.length >= OBSERVATION_LOOKUP_LIMIT)
        return {
          ok: false,
          retry: true,
          error: `more than ${OBSERVATION_LOOKUP_LIMIT} observations of ${where} since the request: cannot tell whether it was sent`,
        };
      return client.report(reportPath(config.asset_key, 'observation'), observationBody(payload));
    },
    close: async () => {},
  };
}
