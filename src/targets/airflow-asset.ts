import { DEFAULT_PARTITION_FORMAT, partitionKey } from '../core/partition-key.js';
import { airflowRunReport, type RunReport } from '../core/runs.js';
import type { RunIdentity, TriggerPayload } from '../core/trigger.js';
import { airflowAuth } from './airflow-token.js';
import { type ResolvedTarget, scrubSecrets } from './secrets.js';
import {
  type DeliveryResult,
  getJson,
  type Observation,
  type ObservedRun,
  postJson,
  resultOfStatus,
  type Target,
} from './target.js';

export type AirflowAssetConfig = Omit<Extract<ResolvedTarget, { type: 'airflow_asset' }>, 'type'>;

/** Pages of asset events read at most when looking a decision's event up. */
const LOOKUP_PAGES = 5;
const PAGE = 100;

// biome-ignore lint/suspicious/noExplicitAny: Airflow's answers are read as untyped JSON
type Json = Record<string, any>;

/** The key a decision's asset event carries in `extra`: the run id (attempt N > 1 has its own). */
const eventKey = (payload: RunIdentity) => payload.run_id ?? payload.idempotency_key;

/**
 * The `airflow_asset` target (SPEC §14): a decision becomes an asset event,
 * `POST /api/v2/assets/events` with the asset's id (looked up once by name or URI), the period's
 * `partition_key` (partition-key.ts) and the payload in `extra`, so Airflow's own scheduler runs
 * the DAGs scheduled on the asset for that partition. A redelivery first looks for its event
 * (`extra.run_id`, among the asset's events since the decision) and never posts a second one.
 * Without `follow_dag_id` the run succeeds once Airflow accepted the event; with it, the run's
 * outcome is that DAG's run created from the event (the event's `created_dagruns`).
 */
export function airflowAssetTarget(config: AirflowAssetConfig, now: () => number = Date.now): Target {
  const base = config.url.replace(/\/+$/, '');
  const authorized = airflowAuth(config, now);
  let assetId: number | undefined;
  /** The followed DAG's run of each event once known (by the event's run id), bounded. */
  const followed = new Map<string, string>();
  const what = config.asset !== undefined ? `asset ${config.asset}` : `asset URI ${config.asset_uri}`;

  const keyOf = (payload: TriggerPayload) =>
    partitionKey(
      String(payload.period.start),
      config.partition_timezone ?? 'UTC',
      config.partition_key_format ?? DEFAULT_PARTITION_FORMAT,
    );

  return {
    async deliver(payload) {
      const used: string[] = [];
      const result = await deliver(payload, used);
      return result.ok ? result : { ...result, error: scrubSecrets(result.error, used) };
    },
    observe:
      config.follow_dag_id === undefined ? acceptedIsDone : (runs) => follow(runs, config.follow_dag_id!),
    close: async () => {},
  };

  async function deliver(payload: TriggerPayload, used: string[]): Promise<DeliveryResult> {
    const id = await resolveAsset(used);
    if (typeof id !== 'number') return id;
    const existing = await findEvent(id, payload, used);
    if ('error' in existing) return { ok: false, retry: true, error: existing.error };
    if (existing.event) return { ok: true };
    const body = { asset_id: id, partition_key: keyOf(payload), extra: payload };
    const response = await authorized(used, (auth) =>
      postJson(`${base}/api/v2/assets/events`, body, auth, config.timeout),
    );
    if ('error' in response) return { ok: false, retry: true, error: response.error };
    return resultOfStatus(response.status, response.text);
  }

  /** The asset's id, by exact name or URI (`GET /api/v2/assets?name_pattern=`), cached once found. */
  async function resolveAsset(used: string[]): Promise<number | DeliveryResult> {
    if (assetId !== undefined) return assetId;
    const [param, wanted, field] =
      config.asset !== undefined
        ? ['name_pattern', config.asset, 'name']
        : ['uri_pattern', config.asset_uri!, 'uri'];
    const url = `${base}/api/v2/assets?${param}=${encodeURIComponent(wanted)}&limit=${PAGE}`;
    const response = await authorized(used, (auth) => getJson(url, auth, config.timeout));
    if ('error' in response) return { ok: false, retry: true, error: response.error };
    if (response.status !== 200) return resultOfStatus(response.status, response.text);
    const assets = (parse(response.text)?.assets ?? []) as Json[];
    const found = assets.find((a) => a[field] === wanted);
    // Not there yet (no DAG parsed declares it): retried until one does.
    if (!found) return { ok: false, retry: true, error: `Airflow has no ${what} (yet)` };
    assetId = Number(found.id);
    return assetId;
  }

  /** This decision's event among the asset's events since it was decided, newest first. */
  async function findEvent(
    id: number,
    payload: RunIdentity,
    used: string[],
  ): Promise<{ event: Json | undefined } | { error: string }> {
    const since = new Date(Date.parse(payload.decided_at) - 1_000).toISOString();
    let offset = 0;
    for (let page = 0; page < LOOKUP_PAGES; page++) {
      const query = new URLSearchParams({
        asset_id: String(id),
        timestamp_gte: since,
        order_by: '-timestamp',
        limit: String(PAGE),
        offset: String(offset),
      });
      const response = await authorized(used, (auth) =>
        getJson(`${base}/api/v2/assets/events?${query}`, auth, config.timeout),
      );
      if ('error' in response) return response;
      if (response.status !== 200)
        return { error: `GET asset events: HTTP ${response.status}: ${response.text.slice(0, 300)}` };
      const answer = parse(response.text);
      const events = (answer?.asset_events ?? []) as Json[];
      const event = events.find((e) => (e.extra?.run_id ?? e.extra?.idempotency_key) === eventKey(payload));
      if (event) return { event };
      // A page cut short by [api] maximum_page_limit is not the end: total_entries is.
      offset += events.length;
      if (events.length === 0 || offset >= Number(answer?.total_entries ?? 0)) return { event: undefined };
    }
    return {
      error: `more than ${LOOKUP_PAGES * PAGE} events of ${what} since the decision: cannot tell whether it was sent`,
    };
  }

  async function acceptedIsDone(runs: readonly ObservedRun[]): Promise<Observation> {
    return new Map(runs.map((r) => [r.runId, { kind: 'target', state: 'succeeded' } as RunReport]));
  }

  /** Each run's event, then the followed DAG's run created from it (or for its partition). */
  async function follow(
    runs: readonly ObservedRun[],
    dagId: string,
  ): Promise<Observation | { error: string }> {
    const used: string[] = [];
    const id = await resolveAsset(used);
    if (typeof id !== 'number') return { error: id.ok ? 'unreachable' : id.error };
    const out = new Map<string, RunReport | null>();
    for (const r of runs) {
      let runId = followed.get(eventKey(r.payload));
      if (runId === undefined) {
        const found = await findEvent(id, r.payload, used);
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
      const run = await authorized(used, (auth) =>
        getJson(
          `${base}/api/v2/dags/${encodeURIComponent(dagId)}/dagRuns/${encodeURIComponent(runId)}`,
          auth,
          config.timeout,
        ),
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

function parse(text: string): Json | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' ? (value as Json) : undefined;
  } catch {
    return undefined;
  }
}
