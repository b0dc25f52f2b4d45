import type { TriggerPayload } from '../../core/trigger.js';
import { type DeliveryResult, postJson, resultOfStatus, type Target } from './target.js';

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
 * Creates a DAG run through Airflow's REST API (v2) for the period's data interval, with the
 * coverage in `conf`. A deterministic dag_run_id makes a redelivery a 409, which counts as done.
 */
export function airflowTarget(config: AirflowConfig): Target {
  const endpoint = `${config.url.replace(/\/+$/, '')}/api/v2/dags/${encodeURIComponent(config.dag_id)}/dagRuns`;
  const headers: Record<string, string> = {};
  if (config.token) headers.Authorization = `Bearer ${config.token}`;
  else if (config.username !== undefined) {
    headers.Authorization = `Basic ${Buffer.from(`${config.username}:${config.password ?? ''}`).toString('base64')}`;
  }
  return {
    async deliver(payload: TriggerPayload): Promise<DeliveryResult> {
      const body = {
        dag_run_id: dagRunId(payload.idempotency_key),
        logical_date: payload.period.start,
        data_interval_start: payload.period.start,
        data_interval_end: payload.period.end,
        conf: payload,
        note: `coverage-rollup ${payload.reason} trigger, generation ${payload.generation}`,
      };
      const response = await postJson(endpoint, body, headers, config.timeout);
      if ('error' in response) return { ok: false, retry: true, error: response.error };
      if (response.status === 409) return { ok: true };
      return resultOfStatus(response.status, response.text);
    },
    close: async () => {},
  };
}
