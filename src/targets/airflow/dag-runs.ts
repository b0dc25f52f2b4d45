/**
 * The `airflow` target type: a decision becomes a DAG run through Airflow 3's REST API, for the
 * period's data interval, and the run is followed by listing the DAG's runs. A repair request
 * attempt becomes a run of the producer's backfill DAG.
 */
import { z } from 'zod';
import { formatPoint, parseTimeBound } from '../../core/intervals/bounds.js';
import type { RepairPayload } from '../../core/repairs/repair-payload.js';
import { airflowRunReport, type RunReport } from '../../core/runs/runs.js';
import type { RunIdentity, TriggerPayload } from '../../core/runs/trigger.js';
import { isoDuration, nonEmpty, targetUrl } from '../../support/fields.js';
import { resultOfStatus, scrubSecrets } from '../requests.js';
import {
  type DeliveryResult,
  defineTarget,
  type Observation,
  type ObservedRun,
  type RepairTarget,
  type ResolvedConfig,
  type Target,
} from '../target.js';
import { airflowApi } from './api.js';
import {
  checkCredentials,
  credentialFields,
  credentialSecrets,
  ianaZone,
  partitionFormat,
} from './config.js';
import { periodPartitionKey } from './partition-key.js';

const schema = z
  .strictObject({
    type: z.literal('airflow'),
    url: targetUrl,
    dag_id: nonEmpty,
    ...credentialFields,
    timeout: isoDuration.default(10_000),
    // No defaults: a default would change every stored airflow rollup's definition hash.
    partitioned: z.boolean().optional(),
    partition_key_format: partitionFormat.optional(),
    partition_timezone: ianaZone.optional(),
  })
  .superRefine(checkCredentials);

export const airflowType = defineTarget({
  type: 'airflow',
  docs: 'docs/targets/airflow.md#the-airflow-target',
  schema,
  secrets: credentialSecrets,
  follow: { source: 'airflow', firstCheckMs: 5000, thinOut: false, watchFinished: true },
  trigger: (config) => airflowTarget(config),
  // airflow's partitioned and the partition key's format and zone have no meaning for a request.
  repair: (config) => airflowRepairTarget(config),
  describe: (config) => `airflow DAG ${config.dag_id}`,
  rollupProblem: (_config, domain) =>
    domain === 'integer'
      ? { field: 'target', message: 'an airflow target needs a time rollup (a data interval of instants)' }
      : undefined,
});

export type AirflowConfig = Omit<ResolvedConfig<typeof schema>, 'type'>;

/**
 * Airflow run ids allow letters, digits and `_.~+-`; the idempotency key maps onto them one to one,
 * and attempt N > 1 of a run adds `_aN` (`coverage_rollup__orders_daily__20250601T000000Z__gen1_a2`).
 */
export function dagRunId(idempotencyKey: string, attempt = 1): string {
  const base = `coverage_rollup__${idempotencyKey.replace('@', '__').replace('#', '__gen')}`;
  return attempt > 1 ? `${base}_a${attempt}` : base;
}

/** Airflow's largest page by default ([api] maximum_page_limit; a lower limit only means more pages). */
const LIST_LIMIT = 100;
/** Pages one observation reads at most: its requests are bounded whatever Airflow holds. */
export const OBSERVE_PAGES = 3;

/** Logical-date offsets per attempt, in µs: unique for generations below this many. */
const ATTEMPT_OFFSET_US = 100_000;

/**
 * The run's logical date. Airflow 3 keeps (dag_id, logical_date) unique and drops the data
 * interval of a run without a logical date, so a rerun of a period (generation g > 1) cannot reuse
 * the period start: it gets the start plus g - 1 microseconds, and attempt a > 1 of it another
 * (a - 1) x 0.1 s, which leaves `ds`, `ts_nodash` and the data interval as they are.
 */
export function logicalDate(payload: RunIdentity): string {
  const start = String(payload.period.start);
  const attempt = payload.attempt ?? 1;
  const offset = payload.generation - 1 + (attempt - 1) * ATTEMPT_OFFSET_US;
  if (offset <= 0) return start;
  return String(formatPoint('time', parseTimeBound(start, 'period.start', 'UTC').value + offset));
}

/**
 * Airflow 3's `TriggerDAGRunPostBody`, field for field: Airflow refuses any other field with 422.
 * `run_after` is the data interval's end, as for the runs Airflow schedules itself. A DAG whose
 * timetable is partitioned (Airflow 3.2+) also gets `partition_key` (partition-key.ts); for any
 * other DAG the field is left out, so Airflow 3.0 and 3.1 (which do not know it) accept the body.
 */
export function triggerBody(payload: TriggerPayload, partition?: string) {
  return {
    ...(partition === undefined ? {} : { partition_key: partition }),
    dag_run_id: dagRunId(payload.idempotency_key, payload.attempt ?? 1),
    logical_date: logicalDate(payload),
    data_interval_start: payload.period.start,
    data_interval_end: payload.period.end,
    run_after: payload.period.end,
    conf: payload,
    note: `coverage-rollup ${payload.reason} trigger, generation ${payload.generation}${(payload.attempt ?? 1) > 1 ? `, attempt ${payload.attempt}` : ''}`,
  };
}

/**
 * Creates a DAG run through Airflow's REST API (v2) for the period's data interval, with the
 * coverage in `conf`. A deterministic dag_run_id makes a redelivery a 409, which counts as done
 * once the run with that id is found; a 409 for another run (one holding the logical date) is not.
 *
 * Authentication: a static `token` is sent as it is; `username`/`password` (or `client_id`/
 * `client_secret`) are exchanged for a JWT at `POST {url}/auth/token`, which is cached, renewed
 * before it expires and once more when Airflow answers 401.
 */
export function airflowTarget(config: AirflowConfig, now: () => number = Date.now): Target {
  const api = airflowApi(config, now);
  const dagRuns = dagRunsPath(config.dag_id);
  /** Whether the DAG's timetable is partitioned, asked once (`GET /api/v2/dags/{dag_id}`). */
  let partitioned: boolean | undefined;

  return {
    async deliver(payload: TriggerPayload): Promise<DeliveryResult> {
      const used: string[] = [];
      const result = await attempt(payload, used);
      // No token of ours may reach last_error or a log line, even if Airflow echoes it.
      return result.ok ? result : { ...result, error: scrubSecrets(result.error, used) };
    },
    observe: (runs) => observeRuns(runs),
    close: async () => {},
  };

  /**
   * `POST /api/v2/dags/~/dagRuns/list` (Airflow 3's batch list; it filters by DAG, state and date
   * ranges, not by run id) over the logical dates of up to 100 runs of this DAG, at most
   * OBSERVE_PAGES pages. A run missing from the complete window is no longer known to Airflow
   * (deleted): lost. Runs left out of a window that other runs fill are asked about again later.
   */
  async function observeRuns(runs: readonly ObservedRun[]): Promise<Observation | { error: string }> {
    if (runs.length === 0) return new Map();
    const wanted = new Map(
      runs.map((r) => [dagRunId(r.payload.idempotency_key, r.payload.attempt ?? 1), r.runId]),
    );
    const dates = runs.map((r) => parseTimeBound(logicalDate(r.payload), 'logical_date', 'UTC').value);
    const body = {
      dag_ids: [config.dag_id],
      logical_date_gte: String(formatPoint('time', Math.min(...dates))),
      logical_date_lte: String(formatPoint('time', Math.max(...dates))),
      order_by: 'logical_date',
      page_limit: LIST_LIMIT,
    };
    const out = new Map<string, RunReport | null>();
    const used: string[] = [];
    let offset = 0;
    for (let page = 0; page < OBSERVE_PAGES; page++) {
      const response = await api.post('/api/v2/dags/~/dagRuns/list', { ...body, page_offset: offset }, used);
      if ('error' in response) return { error: scrubSecrets(response.error, used) };
      if (response.status !== 200)
        return { error: scrubSecrets(`HTTP ${response.status}: ${response.text.slice(0, 300)}`, used) };
      let answer: { dag_runs?: Array<{ dag_run_id?: string; state?: string }>; total_entries?: number };
      try {
        answer = JSON.parse(response.text) as typeof answer;
      } catch {
        return { error: 'the dag run list is not JSON' };
      }
      const listed = answer.dag_runs ?? [];
      for (const run of listed) {
        const id = wanted.get(run.dag_run_id ?? '');
        if (id !== undefined) out.set(id, airflowRunReport(String(run.state)));
      }
      // Airflow caps a page at its [api] maximum_page_limit without saying so: a short page is not
      // the end, total_entries is; the next page starts where this one ended.
      offset += listed.length;
      const total = answer.total_entries;
      const complete =
        listed.length === 0 || (typeof total === 'number' ? offset >= total : listed.length < LIST_LIMIT);
      if (complete) {
        const gone = `DAG ${config.dag_id} has no such run any more`;
        for (const id of wanted.values())
          if (!out.has(id)) out.set(id, { kind: 'target', state: 'lost', error: gone });
        return out;
      }
      if (out.size === wanted.size) return out;
    }
    for (const id of wanted.values()) if (!out.has(id)) out.set(id, null);
    return out;
  }

  async function dagPartitioned(used: string[]): Promise<boolean | DeliveryResult> {
    if (config.partitioned !== undefined) return config.partitioned;
    if (partitioned !== undefined) return partitioned;
    const response = await api.get(`/api/v2/dags/${encodeURIComponent(config.dag_id)}`, used);
    if ('error' in response) return { ok: false, retry: true, error: response.error };
    if (response.status === 404) {
      // Not parsed yet (a new DAG file) or removed: retried until Airflow knows it.
      return { ok: false, retry: true, error: `HTTP 404: Airflow has no DAG ${config.dag_id} (yet)` };
    }
    if (response.status !== 200) return resultOfStatus(response.status, response.text);
    try {
      partitioned =
        (JSON.parse(response.text) as { timetable_partitioned?: unknown }).timetable_partitioned === true;
    } catch {
      return { ok: false, retry: true, error: `GET the DAG ${config.dag_id}: the answer is not JSON` };
    }
    return partitioned;
  }

  async function attempt(payload: TriggerPayload, used: string[]): Promise<DeliveryResult> {
    const isPartitioned = await dagPartitioned(used);
    if (typeof isPartitioned !== 'boolean') return isPartitioned;
    const partition = isPartitioned ? periodPartitionKey(payload, config) : undefined;
    const body = triggerBody(payload, partition);
    // The dag_run_id already makes a redelivery a 409; the header lets a gateway in front dedupe too.
    const extra = { 'Idempotency-Key': payload.run_id ?? payload.idempotency_key };
    const response = await api.post(dagRuns, body, used, extra);
    if ('error' in response) return { ok: false, retry: true, error: response.error };
    if (response.status === 409) return existingRun(body.dag_run_id, body.logical_date, used);
    if (response.status === 404) {
      partitioned = undefined; // asked again next time: the DAG may come back changed
      return { ok: false, retry: true, error: `HTTP 404: ${response.text.slice(0, 300)}` };
    }
    return resultOfStatus(response.status, response.text);
  }

  /** After a 409: delivered if the run with our id exists, refused if another run holds the date. */
  async function existingRun(runId: string, date: string, used: string[]): Promise<DeliveryResult> {
    const found = await api.get(`${dagRuns}/${encodeURIComponent(runId)}`, used);
    if ('error' in found) return { ok: false, retry: true, error: found.error };
    if (found.status === 200) return { ok: true };
    if (found.status === 404) {
      return {
        ok: false,
        retry: false,
        error: `HTTP 409: DAG ${config.dag_id} has no run ${runId}; another run holds logical date ${date}`,
      };
    }
    return resultOfStatus(found.status, found.text);
  }
}

/** Where a DAG's runs are created and read, under the API. */
function dagRunsPath(dagId: string): string {
  return `/api/v2/dags/${encodeURIComponent(dagId)}/dagRuns`;
}

/** Airflow run ids allow letters, digits and `_.~+-`: the key maps onto them as it is. */
function repairDagRunId(payload: RepairPayload): string {
  return `coverage_rollup__${payload.idempotency_key}`;
}

/**
 * A DAG run of the producer's backfill DAG with the request in `conf`. No logical date: a repair
 * is not a data interval of the DAG's schedule, and Airflow keeps (dag_id, logical_date) unique.
 * A redelivery is a 409, done once the run with our id is found.
 */
function airflowRepairTarget(config: AirflowConfig): RepairTarget {
  const api = airflowApi(config, Date.now);
  const dagRuns = dagRunsPath(config.dag_id);
  return {
    async deliver(payload) {
      const used: string[] = [];
      const runId = repairDagRunId(payload);
      const body = {
        dag_run_id: runId,
        logical_date: null,
        conf: payload,
        note: `coverage-rollup repair of ${payload.asset}, attempt ${payload.attempt}`,
      };
      const headers = { 'Idempotency-Key': payload.idempotency_key };
      const sent = await api.post(dagRuns, body, used, headers);
      let result: DeliveryResult;
      if ('error' in sent) result = { ok: false, retry: true, error: sent.error };
      else if (sent.status === 409) {
        const found = await api.get(`${dagRuns}/${encodeURIComponent(runId)}`, used);
        result =
          'error' in found
            ? { ok: false, retry: true, error: found.error }
            : resultOfStatus(found.status, found.text);
      } else result = resultOfStatus(sent.status, sent.text);
      return result.ok ? result : { ...result, error: scrubSecrets(result.error, used) };
    },
    close: async () => {},
  };
}
