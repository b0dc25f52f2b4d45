/**
 * dagster-coverage-rollup, the built wheel (tools/real/run.mjs installs it into the Dagster venv),
 * in a real Dagster 1.13: `dagster dev` (webserver and dagster-daemon) over
 * test/real/dagster-code/coverage_sensor_defs.py, the built daemon with an hourly rollup whose
 * `dagster` target materializes warehouse/orders_hourly and whose repair target is a webhook this
 * test answers as the producer would.
 *
 * Dagster's own sensor daemon evaluates the sensor (every 5 s), keeps its cursor, launches the runs
 * and runs them, so what is proved is what a user gets: one run per covered hour with that hour's
 * partition key, none for the hour with a hole while it has one (ticks go by), a run of that hour
 * once the repair request is answered, a second run of an hour reprocessed (run key #2), nothing
 * else. The coverage check reports the hole's range for the hour while it has one, and passes in
 * each run the sensor made. A second sensor of the same hourly rollup over daily partitions fails
 * every tick, naming both calendars. Read back over the webserver's GraphQL.
 */

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RepairPayload } from '../../src/core/repairs/repair-payload.js';
import { packageRoot } from '../../src/support/paths.js';
import { TEST_TOKEN } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { REDIS_URL } from '../helpers/env.js';
import { freePort } from '../helpers/ports.js';
import type { DaemonProcess } from '../helpers/process.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { startSuiteDaemon } from './helpers/daemon.js';
import { report } from './helpers/producers.js';
import { SystemProcess, venvBin, waitForHttp } from './helpers/system.js';

const ROLLUP = 'dg_sensor';
const ASSET = 'dg.orders';
const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
const day = new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS - DAY_MS).toISOString().slice(0, 10);
const hour = (h: number, m = 0) => new Date(Date.parse(`${day}T00:00:00Z`) + h * HOUR_MS + m * 60_000);
const iso = (d: Date) => d.toISOString().replace('.000Z', 'Z');
/** The three hours: 10 and 12 complete, 11 with a hole over [11:15, 11:30). */
const [H1, H2, H3] = [10, 11, 12];
const partition = (h: number) => `${day}-${String(h).padStart(2, '0')}:00`;
const runKey = (h: number, generation: number) =>
  `${ROLLUP}@${day.replaceAll('-', '')}T${String(h).padStart(2, '0')}0000Z#${generation}`;
const CODE = join(packageRoot(), 'test', 'real', 'dagster-code', 'coverage_sensor_defs.py');
const LOCATION = 'coverage_sensor_defs.py';
const HOURLY = 'hourly_reports';
const MISMATCH = 'daily_reports_of_an_hourly_rollup';

const dir = mkdtempSync(join(tmpdir(), 'coverage-rollup-dagster-sensor-'));
let dagster: SystemProcess;
let dagsterUrl: string;
let daemon: DaemonProcess;
let webhook: Server;
const repairRequests: RepairPayload[] = [];
let startedMs = 0;
/** When the hour with the hole becomes due for repair (set as the daemon's config is written). */
let repairDueAt = 0;
const REPAIR_MARGIN_MS = 150_000;
/** When the daemon answered (epoch seconds): the sensors' ticks before failed to reach it. */
let daemonUp = 0;

beforeAll(async () => {
  const [daemonPort, dagsterPort, webhookPort] = [await freePort(), await freePort(), await freePort()];
  webhook = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => {
      body += chunk;
    });
    request.on('end', () => {
      repairRequests.push(JSON.parse(body) as RepairPayload);
      response.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => webhook.listen(webhookPort, '127.0.0.1', resolve));

  writeFileSync(join(dir, 'dagster.yaml'), 'telemetry:\n  enabled: false\n');
  dagsterUrl = `http://127.0.0.1:${dagsterPort}`;
  const started = Date.now();
  dagster = new SystemProcess({
    name: 'dagster-dev-sensor',
    command: venvBin('dagster', 'dagster'),
    args: ['dev', '-f', CODE, '-h', '127.0.0.1', '-p', String(dagsterPort)],
    env: {
      DAGSTER_HOME: dir,
      COVERAGE_ROLLUP_URL: `http://127.0.0.1:${daemonPort}`,
      COVERAGE_ROLLUP_TOKEN: TEST_TOKEN,
      COVERAGE_ROLLUP_ROLLUP: ROLLUP,
      COVERAGE_ROLLUP_ASSET: ASSET,
      PARTITIONS_START: day,
    },
    cwd: dir,
  });
  await waitForHttp(`${dagsterUrl}/server_info`, 240_000, dagster);
  startedMs = Date.now() - started;

  // The hour with the hole becomes due for repair REPAIR_MARGIN_MS from now: its events are in by
  // then (the test checks it before it sends them), so the request asks for exactly the hole. At
  // 30 s a daemon starting on a loaded machine took most of it, and the scan asked for the whole hour.
  repairDueAt = Date.now() + REPAIR_MARGIN_MS;
  const dueInSeconds = Math.ceil((repairDueAt - hour(H2 + 1).getTime()) / 1000);
  const db = await createTestDatabase();
  const raw = {
    database_url: db.url,
    redis_url: REDIS_URL,
    log_level: 'info',
    http: { host: '127.0.0.1', port: daemonPort },
    api_tokens: [TEST_TOKEN],
    queue: { prefix: createTestPrefix(), batch_wait: 'PT0.002S' },
    lease: { ttl: 'PT2S', renew_every: 'PT0.5S', retry_every: 'PT0.2S' },
    scheduler: { run_check_every: 'PT0.5S' },
    shutdown_timeout: 'PT10S',
    rollups: [
      {
        id: ROLLUP,
        upstream: [ASSET],
        every: 'hour',
        begin: day,
        target: {
          type: 'dagster',
          url: dagsterUrl,
          asset_key: 'warehouse/orders_hourly',
          partition_format: 'yyyy-MM-dd-HH:mm',
        },
        repair: {
          after: `PT${dueInSeconds}S`,
          every: 'PT1H',
          attempts: 2,
          target: { type: 'webhook', url: `http://127.0.0.1:${webhookPort}/repairs` },
        },
      },
    ],
  };
  daemon = (await startSuiteDaemon('dagster-sensor-daemon', dir, raw)).daemon;
  daemonUp = Date.now() / 1000;
}, 600_000);

afterAll(async () => {
  await dagster?.stop();
  const exit = await daemon?.stop(20_000);
  await new Promise((resolve) => webhook?.close(resolve));
  rmSync(dir, { recursive: true, force: true });
  if (exit) expect(exit).toEqual({ code: 0, signal: null });
}, 120_000);

type Json = Record<string, unknown>;

async function graphql<T>(query: string, variables: Json = {}): Promise<T> {
  const response = await fetch(`${dagsterUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query, variables }),
  });
  const answer = (await response.json()) as { data?: T; errors?: unknown[] };
  if (response.status !== 200 || answer.errors) throw new Error(`GraphQL: ${JSON.stringify(answer)}`);
  return answer.data as T;
}

async function post(path: string, body: unknown): Promise<void> {
  const response = await fetch(`${daemon.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(response.status, await response.text()).toBeLessThan(300);
}

/** Completions of [from, to) of the asset, 15 minutes each. */
function slices(from: Date, to: Date, version: string): Json[] {
  const events: Json[] = [];
  for (let t = from.getTime(); t < to.getTime(); t += 900_000) {
    const start = new Date(t);
    const end = new Date(t + 900_000);
    events.push({ asset: ASSET, start: iso(start), end: iso(end), version, id: `${version}-${iso(start)}` });
  }
  return events;
}

interface Run {
  runId: string;
  status: string;
  tags: Array<{ key: string; value: string }>;
}
const tag = (run: Run, key: string) => run.tags.find((t) => t.key === key)?.value;

/** Every run the hourly sensor made. */
async function sensorRuns(): Promise<Run[]> {
  const data = await graphql<{ runsOrError: { results: Run[] } }>(
    `query ($tags: [ExecutionTag!]) { runsOrError(filter: { tags: $tags }) { ... on Runs { results { runId status tags { key value } } } } }`,
    { tags: [{ key: 'dagster/sensor_name', value: HOURLY }] },
  );
  return data.runsOrError.results;
}

/** How long after `since` (ms) the sensor had made `count` runs. */
async function requestedWithin(count: number, since: number, what: string): Promise<number> {
  await waitFor(async () => (await sensorRuns()).length >= count, { timeout: 240_000, interval: 250, what });
  return Date.now() - since;
}

/** The runs of the sensor by run key, once every one has finished (none queued or running). */
async function finishedRuns(count: number, what: string): Promise<Map<string, Run>> {
  const runs = await waitFor(
    async () => {
      const all = await sensorRuns();
      const done = all.every((r) => ['SUCCESS', 'FAILURE', 'CANCELED'].includes(r.status));
      return all.length >= count && done ? all : undefined;
    },
    { timeout: 240_000, interval: 1_000, what },
  );
  return new Map(runs.map((r) => [tag(r, 'dagster/run_key')!, r]));
}

interface Tick {
  status: string;
  timestamp: number;
  runIds: string[];
  skipReason: string | null;
  error: { message: string; errorChain: Array<{ error: { message: string } }> } | null;
}

async function sensor(name: string): Promise<{ ticks: Tick[]; cursor: string | null }> {
  const data = await graphql<{
    sensorOrError: {
      sensorState: { ticks: Tick[]; typeSpecificData: { lastCursor: string | null } };
    };
  }>(
    `query ($s: SensorSelector!) { sensorOrError(sensorSelector: $s) { ... on Sensor { sensorState {
      typeSpecificData { ... on SensorData { lastCursor } }
      ticks(limit: 100) { status timestamp runIds skipReason error { message errorChain { error { message } } } }
    } } } }`,
    { s: { repositoryLocationName: LOCATION, repositoryName: '__repository__', sensorName: name } },
  );
  const state = data.sensorOrError.sensorState;
  return { ticks: state.ticks, cursor: state.typeSpecificData.lastCursor };
}

/** Waits until the sensor has finished `n` ticks after `since` (epoch seconds); returns them. */
async function ticksAfter(name: string, since: number, n: number): Promise<Tick[]> {
  return waitFor(
    async () => {
      const later = (await sensor(name)).ticks.filter((t) => t.timestamp > since && t.status !== 'STARTED');
      return later.length >= n ? later : undefined;
    },
    { timeout: 120_000, interval: 1_000, what: `${n} ticks of ${name}` },
  );
}

interface CheckExecution {
  runId: string;
  status: string;
  partition: string | null;
  evaluation: {
    success: boolean;
    metadataEntries: Array<{ label: string; floatValue?: number; jsonString?: string; boolValue?: boolean }>;
  } | null;
}

async function checkExecutions(h: number): Promise<CheckExecution[]> {
  const data = await graphql<{ assetCheckExecutions: CheckExecution[] }>(
    `query ($p: String) { assetCheckExecutions(assetKey: { path: ["orders_hourly_report"] }, checkName: "coverage", partition: $p, limit: 20) {
      runId status partition evaluation { success metadataEntries { label
        ... on FloatMetadataEntry { floatValue } ... on JsonMetadataEntry { jsonString } ... on BoolMetadataEntry { boolValue } } }
    } }`,
    { p: partition(h) },
  );
  return data.assetCheckExecutions;
}

const meta = (e: CheckExecution) =>
  Object.fromEntries(e.evaluation!.metadataEntries.map((m) => [m.label, m]));

describe('dagster-coverage-rollup in Dagster 1.13', () => {
  it('runs each covered hour once with its partition key, the hour with a hole once a repair fills it, a reprocessed hour again, and nothing else', async () => {
    // 1. Hours 10 and 12 complete, hour 11 with a hole over [11:15, 11:30).
    const announced = Date.now();
    expect(
      repairDueAt - announced,
      'the setup outlasted the repair margin: the hour with a hole became due before its events were sent',
    ).toBeGreaterThan(10_000);
    await post('/v1/events', [
      ...slices(hour(H1), hour(H1 + 1), 'v1'),
      ...slices(hour(H2), hour(H2, 15), 'v1'),
      ...slices(hour(H2, 30), hour(H2 + 1), 'v1'),
      ...slices(hour(H3), hour(H3 + 1), 'v1'),
    ]);
    const coveredRequestedMs = await requestedWithin(2, announced, 'the runs of hours 10 and 12');
    const first = await finishedRuns(2, 'the runs of hours 10 and 12 to finish');
    const coveredMs = Date.now() - announced;
    expect([...first.keys()].sort()).toEqual([runKey(H1, 1), runKey(H3, 1)]);
    for (const [h, run] of [
      [H1, first.get(runKey(H1, 1))!],
      [H3, first.get(runKey(H3, 1))!],
    ] as const) {
      expect(run.status).toBe('SUCCESS');
      expect(tag(run, 'dagster/partition')).toBe(partition(h));
      expect(tag(run, 'coverage_rollup/generation')).toBe('1');
      expect(tag(run, 'coverage_rollup/period')).toBe(`${day}T${h}`);
    }

    // 2. The hour with a hole is skipped tick after tick; its coverage check says what is missing.
    const requested = (await sensor(HOURLY)).ticks.find((t) => t.runIds.length > 0)!;
    const skipped = await ticksAfter(HOURLY, requested.timestamp, 2);
    for (const t of skipped) {
      expect(t.status).toBe('SKIPPED');
      expect(t.skipReason).toContain('2 requested before');
    }
    const launched = await graphql<{ launchRun: { __typename: string; run?: { runId: string } } }>(
      `mutation ($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename ... on LaunchRunSuccess { run { runId } } } }`,
      {
        p: {
          selector: {
            repositoryLocationName: LOCATION,
            repositoryName: '__repository__',
            jobName: '__ASSET_JOB',
            assetSelection: [],
            assetCheckSelection: [{ assetKey: { path: ['orders_hourly_report'] }, name: 'coverage' }],
          },
          executionMetadata: { tags: [{ key: 'dagster/partition', value: partition(H2) }] },
        },
      },
    );
    expect(launched.launchRun.__typename).toBe('LaunchRunSuccess');
    const holeCheck = await waitFor(
      async () =>
        (await checkExecutions(H2)).find((e) => e.runId === launched.launchRun.run!.runId && e.evaluation),
      { timeout: 120_000, interval: 1_000, what: 'the coverage check of the hour with a hole' },
    );
    expect(holeCheck.evaluation!.success).toBe(false);
    expect(holeCheck.partition).toBe(partition(H2));
    expect(meta(holeCheck).ratio?.floatValue).toBe(0.75);
    expect(JSON.parse(meta(holeCheck).missing!.jsonString!)).toEqual([
      { asset: ASSET, start: iso(hour(H2, 15)), end: iso(hour(H2, 30)) },
    ]);
    expect(await sensorRuns()).toHaveLength(2);

    // 3. The daemon asks for the hole; the test answers as the producer: the hour then runs.
    const request = await waitFor(() => repairRequests.find((r) => r.period?.key === `${day}T${H2}`), {
      timeout: Math.max(0, repairDueAt - Date.now()) + 120_000,
      interval: 500,
      what: 'the repair request of the hour with a hole',
    });
    expect(request.ranges).toEqual([
      { start: iso(hour(H2, 15)), end: iso(hour(H2, 30)), kind: 'missing', required_version: null },
    ]);
    const answered = Date.now();
    await post(
      '/v1/events',
      request.ranges.map((r, i) => ({
        asset: request.asset,
        start: r.start,
        end: r.end,
        version: 'v1',
        id: `${request.idempotency_key}/${i}`,
      })),
    );
    const repairedRequestedMs = await requestedWithin(3, answered, 'the run of the hour once filled');
    const filled = await finishedRuns(3, 'the run of the hour once filled to finish');
    const repairedMs = Date.now() - answered;
    const h2 = filled.get(runKey(H2, 1))!;
    expect(h2.status).toBe('SUCCESS');
    expect(tag(h2, 'dagster/partition')).toBe(partition(H2));
    const h2Check = (await checkExecutions(H2)).find((e) => e.runId === h2.runId)!;
    expect(h2Check.evaluation!.success).toBe(true);
    expect(meta(h2Check).ratio?.floatValue).toBe(1);

    // 4. Hour 10 reprocessed (a replay requirement, then its v2): generation 2 runs under #2.
    await post(`/v1/assets/${ASSET}/replay-requirements`, {
      start: iso(hour(H1)),
      end: iso(hour(H1 + 1)),
      version: 'v2',
    });
    await post('/v1/events', slices(hour(H1), hour(H1 + 1), 'v2'));
    const rerun = await finishedRuns(4, 'the rerun of hour 10');
    expect([...rerun.keys()].sort()).toEqual(
      [runKey(H1, 1), runKey(H1, 2), runKey(H2, 1), runKey(H3, 1)].sort(),
    );
    expect(tag(rerun.get(runKey(H1, 2))!, 'dagster/partition')).toBe(partition(H1));
    expect(tag(rerun.get(runKey(H1, 2))!, 'coverage_rollup/reason')).toBe('replay');
    for (const run of rerun.values()) expect(run.status, run.runId).toBe('SUCCESS');

    // 5. Nothing else, tick after tick, even with the cursor cleared (Dagster knows the run keys);
    // the cursor is then two spans again: hour 10 at generation 2, hours 11-12 at 1.
    const last = Math.max(
      ...(await sensor(HOURLY)).ticks.filter((t) => t.runIds.length).map((t) => t.timestamp),
    );
    await ticksAfter(HOURLY, last, 3);
    expect((await sensorRuns()).length).toBe(4);
    const cleared = Date.now() / 1000;
    await graphql(
      `mutation ($s: SensorSelector!) { setSensorCursor(sensorSelector: $s, cursor: null) { __typename } }`,
      { s: { repositoryLocationName: LOCATION, repositoryName: '__repository__', sensorName: HOURLY } },
    );
    await ticksAfter(HOURLY, cleared, 2);
    expect((await sensorRuns()).length).toBe(4);
    const failed = (await sensor(HOURLY)).ticks.filter(
      (t) => t.timestamp > daemonUp && t.status === 'FAILURE',
    );
    expect(failed.map((t) => t.error?.errorChain.map((c) => c.error.message))).toEqual([]);
    const cursor = JSON.parse((await sensor(HOURLY)).cursor!) as { requested: number[][] };
    expect(cursor.requested).toEqual([
      [hour(H1).getTime(), hour(H1 + 1).getTime(), 2],
      [hour(H2).getTime(), hour(H3 + 1).getTime(), 1],
    ]);

    // 6. The same rollup under daily partitions: every tick fails, naming both calendars.
    const mismatch = (await sensor(MISMATCH)).ticks.filter(
      (t) => t.timestamp > daemonUp && t.status !== 'STARTED',
    );
    expect(mismatch.length).toBeGreaterThan(0);
    for (const t of mismatch) {
      expect(t.status).toBe('FAILURE');
      const chain = t.error!.errorChain.map((c) => c.error.message).join('\n');
      expect(chain).toContain('CalendarMismatchError');
      expect(chain).toContain('every hour, timezone UTC');
      expect(chain).toContain("cron '0 0 * * *' in UTC");
    }
    report(
      `dagster-coverage-rollup: dagster dev (Dagster 1.13.28) ready in ${startedMs} ms; the covered hours ` +
        `${H1} and ${H3} were requested ${coveredRequestedMs} ms after their events and finished at ${coveredMs} ms, ` +
        `hour ${H2} (a hole) was skipped by ${skipped.length} ticks and its check failed at ratio 0.75, ` +
        `requested ${repairedRequestedMs} ms after the repair request was answered and finished at ${repairedMs} ms; ` +
        `hour ${H1} reprocessed ran again as ${runKey(H1, 2)}; 4 runs in all; ` +
        `${mismatch.length} ticks of the daily sensor refused the hourly calendar`,
    );
  }, 900_000);
});
