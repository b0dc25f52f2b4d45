/**
 * Decision latency of bench:peers: from the last slice of an hour accepted to the hour's
 * downstream run queued (or, for our dagster target, the hour's materialization recorded in
 * Dagster, where its automation or a sensor takes over).
 *
 * - Airflow's own: 60 asset events on `peer.minutes`, one per minute key, posted 8 at a time;
 *   `peer_minutes_rollup` (RollupMapper over HourWindow) queues the hour's run. The end is the
 *   run's `queued_at`, read from Airflow's database (not its API, which our side needs).
 * - Ours into Airflow: 60 one-minute events to `POST /v1/events`, 8 at a time; the rollup's
 *   airflow_asset target posts the covered hour to `peer.hourly`, whose consumer DAG Airflow
 *   queues (`queued_at` again).
 * - Dagster's own: 12 materializations of `peers/slices`, one per 5-minute partition; the
 *   automation condition sensor requests `peers/hourly_rollup` for the hour. The end is the run's
 *   creation time.
 * - Ours into Dagster: 12 five-minute events to `POST /v1/events`; the dagster target reports the
 *   hour of `peers/ours_hourly`. The end is that materialization's timestamp in Dagster.
 *
 * Every way sends its hour's slices 8 at a time but the last, which goes alone 3 s later (see
 * LAST_SLICE_AFTER_MS). The start is our clock when that last request answered; the ends are the
 * peers' clocks on the same machine.
 */
import { connect } from '../../src/store/pg/db.js';
import { waitFor } from '../../test/helpers/wait.js';
import type { RealAirflow } from '../../test/real/helpers/airflow.js';
import { median, round } from '../common.js';
import { airflowKey } from './coverage.js';
import type { PeerDagster } from './systems.js';

const MINUTE = 60_000;
const IN_FLIGHT = 8;
const RUN_WAIT_MS = 300_000;

/**
 * The pause before the hour's last slice. Slices of a stream arrive spread over the hour, so the
 * last one comes alone, to a peer that has been idle since the one before; sent in the same burst
 * as the others, it would find Airflow's scheduler still looping on the burst (its idle sleep
 * skipped) and measure a wake-up a real stream does not get.
 */
const LAST_SLICE_AFTER_MS = 3_000;

/**
 * Sends `n` requests, all but the last `IN_FLIGHT` at a time, then the last one alone after
 * LAST_SLICE_AFTER_MS; resolves with our clock when it answered.
 */
async function sendAll(n: number, send: (i: number) => Promise<void>): Promise<number> {
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < n - 1) await send(next++);
    }),
  );
  await new Promise((resolve) => setTimeout(resolve, LAST_SLICE_AFTER_MS));
  await send(n - 1);
  return Date.now();
}

async function postOurs(url: string, token: string, event: Record<string, unknown>): Promise<void> {
  const response = await fetch(`${url}/v1/events`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify(event),
  });
  if (response.status !== 200)
    throw new Error(`POST /v1/events: ${response.status} ${await response.text()}`);
}

const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');

/** Where our side's time went: from the last answer to the decision, and to the target's acceptance. */
export interface OurStages {
  readonly total: number;
  readonly decided: number | null;
  readonly delivered: number | null;
}

async function ourStages(
  daemon: { url: string; token: string },
  rollup: string,
  hour: number,
  last: number,
  end: number,
): Promise<OurStages> {
  const key = new Date(hour).toISOString().slice(0, 13);
  const response = await fetch(`${daemon.url}/v1/rollups/${rollup}/periods/${key}`, {
    headers: { authorization: `Bearer ${daemon.token}` },
  });
  const answer = (await response.json()) as {
    triggers?: Array<{ decided_at?: string; delivered_at?: string }>;
  };
  const trigger = answer.triggers?.[0];
  const at = (t: string | undefined) => (t ? Date.parse(t) - last : null);
  return { total: end - last, decided: at(trigger?.decided_at), delivered: at(trigger?.delivered_at) };
}

/**
 * When Airflow queued `dagId`'s run of the hour starting at `hour` (its partition key
 * `%Y-%m-%dT%H`), read from its metadata database: polling its API instead would queue the
 * benchmark's own requests on the api-server's one worker in front of our target's delivery (a
 * request Airflow's own rollup does not need), so the observer would slow one side only.
 */
async function airflowQueuedAt(airflow: RealAirflow, dagId: string, hour: number): Promise<number> {
  const key = airflowKey(hour).slice(0, 13);
  const sql = connect(airflow.databaseUrl, { max: 1 });
  try {
    return await waitFor(
      async () => {
        const [run] = await sql<{ queued_at: Date | null }[]>`
          select queued_at from dag_run
          where dag_id = ${dagId} and partition_key = ${key} and queued_at is not null
          order by id limit 1`;
        return run?.queued_at ? run.queued_at.getTime() : undefined;
      },
      { timeout: RUN_WAIT_MS, interval: 20, what: `${dagId}'s run of ${key}` },
    );
  } finally {
    await sql.end({ timeout: 5 });
  }
}

export async function airflowOwn(
  airflow: RealAirflow,
  minutesAssetId: number,
  hour: number,
): Promise<number> {
  const last = await sendAll(60, async (i) => {
    const answer = await airflow.api('POST', '/api/v2/assets/events', {
      asset_id: minutesAssetId,
      partition_key: airflowKey(hour + i * MINUTE),
    });
    if (answer.status !== 200) throw new Error(`Airflow asset event: ${answer.status}`);
  });
  return (await airflowQueuedAt(airflow, 'peer_minutes_rollup', hour)) - last;
}

export async function oursIntoAirflow(
  airflow: RealAirflow,
  daemon: { url: string; token: string },
  asset: string,
  hour: number,
): Promise<OurStages> {
  const last = await sendAll(60, (i) =>
    postOurs(daemon.url, daemon.token, {
      asset,
      start: iso(hour + i * MINUTE),
      end: iso(hour + (i + 1) * MINUTE),
    }),
  );
  const queued = await airflowQueuedAt(airflow, 'peer_hourly_consumer', hour);
  return ourStages(daemon, 'peer_airflow', hour, last, queued);
}

/** Dagster's key of a time partition, `%Y-%m-%d-%H:%M`. */
const dagsterKey = (ms: number) => new Date(ms).toISOString().slice(0, 16).replace('T', '-');

export async function dagsterOwn(dagster: PeerDagster, hour: number): Promise<number> {
  const last = await sendAll(12, (i) =>
    dagster.report('peers/slices', { partition: dagsterKey(hour + i * 5 * MINUTE) }),
  );
  const created = await waitFor(
    async () => {
      const data = await dagster.graphql(
        `query ($tags: [ExecutionTag!]) { runsOrError(filter: {tags: $tags}) {
           ... on Runs { results { runId creationTime } } } }`,
        { tags: [{ key: 'dagster/partition', value: dagsterKey(hour) }] },
      );
      const runs = (data.runsOrError?.results ?? []) as Array<{ creationTime: number }>;
      return runs.length > 0 ? Math.min(...runs.map((r) => r.creationTime)) * 1000 : undefined;
    },
    { timeout: RUN_WAIT_MS, interval: 250, what: `Dagster's run of ${dagsterKey(hour)}` },
  );
  return created - last;
}

export async function oursIntoDagster(
  dagster: PeerDagster,
  daemon: { url: string; token: string },
  asset: string,
  hour: number,
): Promise<OurStages> {
  const last = await sendAll(12, (i) =>
    postOurs(daemon.url, daemon.token, {
      asset,
      start: iso(hour + i * 5 * MINUTE),
      end: iso(hour + (i + 1) * 5 * MINUTE),
    }),
  );
  const recorded = await waitFor(
    async () => {
      const data = await dagster.graphql(
        `query ($partition: String!) { assetOrError(assetKey: {path: ["peers", "ours_hourly"]}) {
           ... on Asset { assetMaterializations(partitions: [$partition]) { timestamp } } } }`,
        { partition: dagsterKey(hour) },
      );
      const events = (data.assetOrError?.assetMaterializations ?? []) as Array<{ timestamp: string }>;
      return events.length > 0 ? Number(events[0]!.timestamp) : undefined;
    },
    { timeout: RUN_WAIT_MS, interval: 100, what: `our materialization of ${dagsterKey(hour)}` },
  );
  return ourStages(daemon, 'peer_dagster', hour, last, recorded);
}

/** p50 and every value, milliseconds; for our side, the stages of each too. */
export function summary(values: ReadonlyArray<number | OurStages>) {
  const totals = values.map((v) => (typeof v === 'number' ? v : v.total));
  const stages = values.flatMap((v) => (typeof v === 'number' ? [] : [v]));
  return {
    n: values.length,
    p50_ms: totals.length > 0 ? round(median(totals), 0) : null,
    all_ms: totals.map((v) => Math.round(v)),
    ...(stages.length > 0
      ? {
          decided_after_ms: stages.map((s) => s.decided && Math.round(s.decided)),
          delivered_after_ms: stages.map((s) => s.delivered && Math.round(s.delivered)),
        }
      : {}),
  };
}
