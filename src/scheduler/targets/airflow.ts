import { formatPoint, parseTimeBound } from '../../core/bounds.js';
import type { TriggerPayload } from '../../core/trigger.js';
import { type DeliveryResult, getJson, postJson, resultOfStatus, type Target } from './target.js';

export interface AirflowConfig {
  readonly url: string;
  readonly dag_id: string;
  readonly token?: string | undefined;
  readonly username?: string | undefined;
  readonly password?: string | undefined;
  readonly timeout: number;
}

/** Airflow run ids allow letters, digits and `_.~+-`; the idempotency key maps onto them one to one. */
export function dagRunId(idempotencyKey: string): string {
  return `coverage_rollup__${idempotencyKey.replace('@', '__').replace('#', '__gen')}`;
}

/**
 * The run's logical date. Airflow 3 keeps (dag_id, logical_date) unique and drops the data
 * interval of a run without a logical date, so a rerun of a period (generation g > 1) cannot reuse
 * the period start: it gets the start plus g - 1 microseconds, which leaves `ds`, `ts_nodash` and
 * the data interval as they are.
 */
export function logicalDate(payload: TriggerPayload): string {
  const start = String(payload.period.start);
  if (payload.generation <= 1) return start;
  return String(
    formatPoint('time', parseTimeBound(start, 'period.start', 'UTC').value + payload.generation - 1),
  );
}

/**
 * Creates a DAG run through Airflow's REST API (v2) for the period's data interval, with the
 * coverage in `conf`. A deterministic dag_run_id makes a redelivery a 409, which counts as done
 * once the run with that id is found; a 409 for another run (one holding the logical date) is not.
 */
export function airflowTarget(config: AirflowConfig): Target {
  const endpoint = `${config.url.replace(/\/+$/, '')}/api/v2/dags/${encodeURIComponent(config.dag_id)}/dagRuns`;
  const auth: Record<string, string> = {};
  if (config.token) auth.Authorization = `Bearer ${config.token}`;
  else if (config.username !== undefined) {
    auth.Authorization = `Basic ${Buffer.from(`${config.username}:${config.password ?? ''}`).toString('base64')}`;
  }
  return {
    async deliver(payload: TriggerPayload): Promise<DeliveryResult> {
      const body = {
        dag_run_id: dagRunId(payload.idempotency_key),
        logical_date: logicalDate(payload),
        data_interval_start: payload.period.start,
        data_interval_end: payload.period.end,
        conf: payload,
        note: `coverage-rollup ${payload.reason} trigger, generation ${payload.generation}`,
      };
      // The dag_run_id already makes a redelivery a 409; the header lets a gateway in front dedupe too.
      const headers = { ...auth, 'Idempotency-Key': payload.idempotency_key };
      const response = await postJson(endpoint, body, headers, config.timeout);
      if ('error' in response) return { ok: false, retry: true, error: response.error };
      if (response.status === 409) return existingRun(body.dag_run_id, logicalDate(payload));
      return resultOfStatus(response.status, response.text);
    },
    close: async () => {},
  };

  /** After a 409: delivered if the run with our id exists, refused if another run holds the date. */
  async function existingRun(runId: string, date: string): Promise<DeliveryResult> {
    const found = await getJson(`${endpoint}/${encodeURIComponent(runId)}`, auth, config.timeout);
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
