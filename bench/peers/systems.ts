/**
 * The peers of bench:peers, started as `npm run test:real` starts them (test/real/helpers/), from
 * the venvs it built under .real/: Airflow 3.3 (api-server with one worker, scheduler,
 * dag-processor, triggerer, LocalExecutor, its metadata database on the local PostgreSQL) with
 * the DAGs of ./airflow_peer_dags.py, and `dagster dev` (webserver and daemon) with
 * ./dagster_peer_defs.py.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../test/helpers/ports.js';
import { waitFor } from '../../test/helpers/wait.js';
import { type Json, type RealAirflow, startAirflow } from '../../test/real/helpers/airflow.js';
import { SystemProcess, venvBin, waitForHttp } from '../../test/real/helpers/system.js';

const HERE = import.meta.dirname;
/** The SimpleAuthManager user coverage-rollup's airflow_asset target posts as (role op). */
export const AIRFLOW_PRODUCER = 'coverage-rollup';
/**
 * Airflow's largest page (`[api] maximum_page_limit`, 100 by default): option A at its best
 * asks for pages this large.
 */
export const AIRFLOW_MAX_PAGE = 10_000;

export async function startPeerAirflow(): Promise<RealAirflow> {
  return startAirflow({
    name: 'peers',
    dagFiles: [join(HERE, 'airflow_peer_dags.py')],
    dagIds: ['peer_minutes_rollup', 'peer_hourly_consumer', 'peer_assets'],
    users: { [AIRFLOW_PRODUCER]: 'op' },
    env: { AIRFLOW__API__MAXIMUM_PAGE_LIMIT: String(AIRFLOW_MAX_PAGE) },
  });
}

/** An Airflow asset's id by name (the DAG declaring it must be parsed). */
export async function airflowAssetId(airflow: RealAirflow, name: string): Promise<number> {
  return waitFor(
    async () => {
      const answer = await airflow.api('GET', `/api/v2/assets?name_pattern=${encodeURIComponent(name)}`);
      return ((answer.body.assets ?? []) as Json[]).find((a) => a.name === name)?.id as number | undefined;
    },
    { timeout: 120_000, interval: 1_000, what: `Airflow's asset ${name}` },
  );
}

export interface PeerDagster {
  readonly url: string;
  /** A GraphQL query's data. */
  graphql(query: string, variables?: Record<string, unknown>): Promise<Json>;
  /** POST /report_asset_materialization/{key}; throws unless Dagster recorded it. */
  report(assetKey: string, body: Record<string, unknown>): Promise<void>;
  stop(): Promise<void>;
}

/** `dagster dev` over ./dagster_peer_defs.py, partitions from `partitionsStart` (`2026-12-01-00:00`). */
export async function startPeerDagster(partitionsStart: string): Promise<PeerDagster> {
  const home = mkdtempSync(join(tmpdir(), 'coverage-rollup-peers-dagster-'));
  writeFileSync(join(home, 'dagster.yaml'), 'telemetry:\n  enabled: false\n');
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const dagster = new SystemProcess({
    name: 'peers-dagster-dev',
    command: venvBin('dagster', 'dagster'),
    args: ['dev', '-f', join(HERE, 'dagster_peer_defs.py'), '-h', '127.0.0.1', '-p', String(port)],
    env: { DAGSTER_HOME: home, PARTITIONS_START: partitionsStart },
    cwd: home,
  });
  const stop = async () => {
    await dagster.stop();
    rmSync(home, { recursive: true, force: true });
  };
  const report = async (assetKey: string, body: Record<string, unknown>) => {
    // Exactly `application/json`: Dagster refuses any other content type.
    const response = await fetch(`${url}/report_asset_materialization/${assetKey}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    if (response.status !== 200) throw new Error(`Dagster report ${assetKey}: ${response.status} ${text}`);
  };
  const graphql = async (query: string, variables: Record<string, unknown> = {}) => {
    const response = await fetch(`${url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query, variables }),
    });
    const answer = (await response.json()) as { data?: Json; errors?: unknown };
    if (!answer.data) throw new Error(`Dagster GraphQL: ${JSON.stringify(answer.errors)}`);
    return answer.data;
  };
  try {
    await waitForHttp(`${url}/server_info`, 240_000, dagster);
    // The code location loads after the webserver answers: a report is refused until it has.
    await waitFor(
      async () => {
        try {
          await report('peers/ingest', { description: 'bench:peers warm-up' });
          return true;
        } catch {
          return false;
        }
      },
      { timeout: 240_000, interval: 1_000, what: 'Dagster to load the peers code location' },
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, graphql, report, stop };
}
