/**
 * bench:peers: the daemon side by side with the real Apache Airflow 3.3 and Dagster 1.13 that
 * `npm run test:real` installs (run it once first: the venvs under .real/ are reused), in one run
 * on one machine. Our side is the built daemon on the embedded default (no URLs: its own
 * PostgreSQL, `queue.backend: postgres`), in a process of its own.
 *
 * 1. Events accepted per second: single-event requests from BENCH_CLIENTS (1,8,32) clients for
 *    BENCH_SECONDS (10) each, to Airflow's `POST /api/v2/assets/events`, Dagster's
 *    `report_asset_materialization` and our `POST /v1/events`; ours in batches of 1000 too.
 * 2. The coverage question over a month and a year of 5-minute slices with holes
 *    (bench/peers/coverage.ts): Airflow's option A through its API against our coverage answer,
 *    the answers checked equal, warm, p50 and p99.
 * 3. Decision latency (bench/peers/latency.ts), BENCH_LATENCY_REPS (5) hours each way after one
 *    not counted.
 *
 * Prints one JSON document per part as it ends, and last the summary: both sides' figures and
 * the ratios, "how many times better we are" (above 1 is ahead), with the goals beside them.
 * A part that fails is reported with its error and the others still run.
 *
 *   npm run test:real   # once: builds .real/airflow and .real/dagster
 *   npm run build && npm run bench:peers
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { namesFile } from '../test/helpers/env.js';
import type { RealAirflow } from '../test/real/helpers/airflow.js';
import { round, spawnDaemon } from './common.js';
import {
  gapsIso,
  loadAirflow,
  MONTH,
  optionA,
  ourAnswer,
  sameGaps,
  timed,
  YEAR,
  yearSlices,
} from './peers/coverage.js';
import {
  airflowOwn,
  dagsterOwn,
  type OurStages,
  oursIntoAirflow,
  oursIntoDagster,
  summary,
} from './peers/latency.js';
import {
  AIRFLOW_MAX_PAGE,
  AIRFLOW_PRODUCER,
  airflowAssetId,
  type PeerDagster,
  startPeerAirflow,
  startPeerDagster,
} from './peers/systems.js';
import { closedLoop, type PostRate, postEvents, slice } from './posts.js';

const TOKEN = 'bench-peers-token-0123456789abcdef';
const CLIENTS = (process.env.BENCH_CLIENTS ?? '1,8,32').split(',').map(Number);
/** The client count the events/s ratios are read at. */
const RATIO_CLIENTS = Number(process.env.BENCH_RATIO_CLIENTS ?? 8);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const LATENCY_REPS = Number(process.env.BENCH_LATENCY_REPS ?? 5);
const MONTH_REPS = Number(process.env.BENCH_MONTH_REPS ?? 7);
const YEAR_REPS = Number(process.env.BENCH_YEAR_REPS ?? 3);
const HOUR = 3_600_000;
const DAY = 86_400_000;
/** Yesterday (UTC): the hours the latency part decides. */
const LATENCY_DAY = Math.floor(Date.now() / DAY) * DAY - DAY;

const out = (document: Record<string, unknown>) => console.log(JSON.stringify(document, null, 2));
const say = (line: string) => process.stderr.write(`bench:peers: ${line}\n`);
const load = () => round(loadavg()[0]!, 2);

/** Runs one part; its error is reported in its document instead of ending the run. */
async function part<T extends Record<string, unknown>>(name: string, run: () => Promise<T>) {
  say(`${name}...`);
  try {
    const document = { part: name, ...(await run()), load_average_1m: load() };
    out(document);
    return document;
  } catch (error) {
    say(`${name} failed: ${(error as Error).stack}`);
    out({ part: name, error: (error as Error).message });
    return undefined;
  }
}

interface Daemon {
  readonly url: string;
  readonly token: string;
}

async function coverage(airflow: RealAirflow, ours: Daemon) {
  const slices = yearSlices();
  const id = await airflowAssetId(airflow, 'peer.slices');
  let t0 = performance.now();
  await loadAirflow(airflow, id, slices);
  const airflowLoadS = (performance.now() - t0) / 1000;
  t0 = performance.now();
  // Ours through its API: batches of 1000 (its largest), four in flight.
  await closedLoop(
    { clients: 4, batch: 1000, requests: Math.ceil(slices.length / 1000) },
    async (first, n) => {
      const body = slices.slice(first, first + n).map((s) => ({
        asset: 'peer.slices',
        start: new Date(s.start).toISOString(),
        end: new Date(s.end).toISOString(),
      }));
      const response = await fetch(`${ours.url}/v1/events`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${ours.token}` },
        body: JSON.stringify(body),
      });
      if (response.status !== 200)
        throw new Error(`loading ours: ${response.status} ${await response.text()}`);
    },
  );
  const oursLoadS = (performance.now() - t0) / 1000;

  const question = async (window: { start: number; end: number }, reps: number, pages: number[]) => {
    const expected = await ourAnswer(ours.url, ours.token, 'peer.slices', window);
    const airflowSide: Record<string, unknown> = {};
    for (const page of pages) {
      const answer = await optionA(airflow, id, window, page);
      if (!sameGaps(answer.gaps, expected))
        throw new Error(
          `answers differ: Airflow ${gapsIso(answer.gaps).join(', ')}; ours ${gapsIso(expected).join(', ')}`,
        );
      // Airflow's default page is the slow one: a few repetitions say enough.
      const n = page === AIRFLOW_MAX_PAGE ? reps : Math.min(reps, 2);
      airflowSide[`page_${page}`] = {
        rows_read: answer.rows,
        pages: answer.pages,
        ...(await timed(n, () => optionA(airflow, id, window, page))),
      };
    }
    const oursSide = await timed(Math.max(reps, 50), () =>
      ourAnswer(ours.url, ours.token, 'peer.slices', window),
    );
    const best = airflowSide[`page_${pages[0]}`] as { p50_ms: number };
    return {
      gaps: gapsIso(expected),
      airflow_option_a: airflowSide,
      ours: oursSide,
      ratio: round(best.p50_ms / oursSide.p50_ms, 1),
    };
  };
  const month = await question(MONTH, MONTH_REPS, [AIRFLOW_MAX_PAGE, 100]);
  const year = await question(YEAR, YEAR_REPS, [AIRFLOW_MAX_PAGE]);
  return {
    slices: slices.length,
    load_seconds: { airflow_rows_written: round(airflowLoadS, 1), ours_post_v1_events: round(oursLoadS, 1) },
    month,
    year,
  };
}

async function eventsPerSecond(airflow: RealAirflow, dagster: PeerDagster | undefined, ours: Daemon) {
  const ingestId = await airflowAssetId(airflow, 'peer.ingest');
  const rows: Array<{ clients: number; ours: PostRate; airflow: PostRate; dagster: PostRate | null }> = [];
  for (const clients of CLIENTS) {
    const options = { clients, batch: 1, seconds: SECONDS };
    const asset = `peer.ingest.c${clients}`;
    const oursRate = await postEvents(ours.url, ours.token, asset, options);
    const airflowRate = await closedLoop(options, async (first) => {
      const s = slice(asset, first);
      const answer = await airflow.api('POST', '/api/v2/assets/events', {
        asset_id: ingestId,
        extra: { start: s.start, end: s.end },
      });
      if (answer.status !== 200) throw new Error(`Airflow asset event: ${answer.status}`);
    });
    const dagsterRate = dagster
      ? await closedLoop(options, async (first) => {
          const s = slice(asset, first);
          await dagster.report('peers/ingest', { metadata: { start: s.start, end: s.end } });
        })
      : null;
    say(
      `${clients} clients: ours ${oursRate.events_per_second}/s, Airflow ${airflowRate.events_per_second}/s, Dagster ${dagsterRate?.events_per_second ?? '-'}/s`,
    );
    rows.push({ clients, ours: oursRate, airflow: airflowRate, dagster: dagsterRate });
  }
  const batches = await postEvents(ours.url, ours.token, 'peer.ingest.batches', {
    clients: 4,
    batch: 1000,
    seconds: SECONDS,
  });
  return { seconds_each: SECONDS, single_events: rows, ours_batches_of_1000: batches };
}

async function latency(airflow: RealAirflow, dagster: PeerDagster | undefined, ours: Daemon) {
  const minutesId = await airflowAssetId(airflow, 'peer.minutes');
  const results = { airflow_own: [] as number[], ours_into_airflow: [] as OurStages[] };
  const dagsterResults = { dagster_own: [] as number[], ours_into_dagster: [] as OurStages[] };
  // Hour 0 of each way is a warm-up, not counted: the first poll of a DAG's runs once held
  // Airflow's API worker for 16-30 s, and our daemon's first delivery (its token) behind it.
  for (let r = 0; r <= LATENCY_REPS; r++) {
    const hour = LATENCY_DAY + r * HOUR;
    const own = await airflowOwn(airflow, minutesId, hour);
    const into = await oursIntoAirflow(airflow, ours, 'peer.minutes.ours', hour);
    const dagsterOwnMs = dagster ? await dagsterOwn(dagster, hour) : undefined;
    const intoDagster = dagster
      ? await oursIntoDagster(dagster, ours, 'peer.slices.dagster', hour)
      : undefined;
    if (r === 0) {
      say(`latency warm-up: ${JSON.stringify({ own, into, dagsterOwnMs, intoDagster })}`);
      continue;
    }
    results.airflow_own.push(own);
    results.ours_into_airflow.push(into);
    if (dagsterOwnMs !== undefined && intoDagster !== undefined) {
      dagsterResults.dagster_own.push(dagsterOwnMs);
      dagsterResults.ours_into_dagster.push(intoDagster);
    }
    say(`latency rep ${r}: ${JSON.stringify({ ...results, ...dagsterResults })}`);
  }
  return {
    airflow_own: summary(results.airflow_own),
    ours_into_airflow: summary(results.ours_into_airflow),
    dagster_own: dagster ? summary(dagsterResults.dagster_own) : null,
    ours_into_dagster: dagster ? summary(dagsterResults.ours_into_dagster) : null,
  };
}

/** The built daemon with no URLs, its rollups feeding the peers' consumers. */
async function startOurs(airflow: RealAirflow, dagster: PeerDagster | undefined) {
  const dir = mkdtempSync(join(tmpdir(), 'crbench-peers-'));
  chmodSync(dir, 0o755); // run as root, the embedded server's user must reach it
  const begin = new Date(LATENCY_DAY).toISOString().slice(0, 10);
  const rollups: unknown[] = [
    {
      id: 'peer_airflow',
      upstream: ['peer.minutes.ours'],
      every: 'hour',
      begin,
      target: {
        type: 'airflow_asset',
        url: airflow.url,
        asset: 'peer.hourly',
        username: AIRFLOW_PRODUCER,
        password: airflow.passwords[AIRFLOW_PRODUCER],
        timeout: 'PT60S',
      },
    },
  ];
  if (dagster)
    rollups.push({
      id: 'peer_dagster',
      upstream: ['peer.slices.dagster'],
      every: 'hour',
      begin,
      target: {
        type: 'dagster',
        url: dagster.url,
        asset_key: 'peers/ours_hourly',
        partition_format: 'yyyy-MM-dd-HH:mm',
      },
    });
  const daemon = await spawnDaemon(
    { data_dir: join(dir, 'data'), api_tokens: [TOKEN], http: { port: 0 }, rollups },
    { compiled: true },
  );
  return {
    url: daemon.url,
    token: TOKEN,
    async stop() {
      await daemon.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const ratio = (a: number | null | undefined, b: number | null | undefined) =>
  a != null && b != null && b > 0 ? round(a / b, 2) : null;

async function main(): Promise<void> {
  const loadAtStart = load();
  say('starting Airflow and Dagster (minutes on a busy machine)');
  const partitionsStart = `${new Date(LATENCY_DAY).toISOString().slice(0, 10)}-00:00`;
  const [airflowStart, dagsterStart] = await Promise.allSettled([
    startPeerAirflow(),
    startPeerDagster(partitionsStart),
  ]);
  const airflow = airflowStart.status === 'fulfilled' ? airflowStart.value : undefined;
  const dagster = dagsterStart.status === 'fulfilled' ? dagsterStart.value : undefined;
  if (dagsterStart.status === 'rejected') say(`Dagster did not start: ${dagsterStart.reason}`);
  let ours: Awaited<ReturnType<typeof startOurs>> | undefined;
  try {
    if (!airflow) throw (airflowStart as PromiseRejectedResult).reason;
    ours = await startOurs(airflow, dagster);
    // Events/s first: after the coverage part's 105,112 events our embedded server is busy with
    // them for a while (the 1-client round that followed them was our slowest in two runs).
    const eps = await part('events_per_second', () => eventsPerSecond(airflow, dagster, ours!));
    const cov = await part('coverage', () => coverage(airflow, ours!));
    const lat = await part('decision_latency', () => latency(airflow, dagster, ours!));

    const at = eps?.single_events.find((r) => r.clients === RATIO_CLIENTS);
    const ratios = {
      coverage_month_ratio: cov?.month.ratio ?? null,
      coverage_year_ratio: cov?.year.ratio ?? null,
      // Latency: theirs over ours (a shorter wait is better).
      decision_latency_ratio_airflow: ratio(lat?.airflow_own.p50_ms, lat?.ours_into_airflow.p50_ms),
      decision_latency_ratio_dagster: ratio(lat?.dagster_own?.p50_ms, lat?.ours_into_dagster?.p50_ms),
      events_per_second_ratio_airflow: ratio(at?.ours.events_per_second, at?.airflow.events_per_second),
      events_per_second_ratio_dagster: ratio(at?.ours.events_per_second, at?.dagster?.events_per_second),
    };
    const goals = {
      coverage_month_ratio: 100,
      coverage_year_ratio: 1000,
      decision_latency_ratio_airflow: 1,
      decision_latency_ratio_dagster: 10,
      events_per_second_ratio_airflow: 20,
      events_per_second_ratio_dagster: 20,
    };
    out({
      bench: 'peers',
      peers: { airflow: '3.3.2', dagster: '1.13.28' },
      coverage: cov
        ? {
            month: {
              airflow_option_a_p50_ms: (
                cov.month.airflow_option_a[`page_${AIRFLOW_MAX_PAGE}`] as { p50_ms: number }
              ).p50_ms,
              ours_p50_ms: cov.month.ours.p50_ms,
            },
            year: {
              airflow_option_a_p50_ms: (
                cov.year.airflow_option_a[`page_${AIRFLOW_MAX_PAGE}`] as { p50_ms: number }
              ).p50_ms,
              ours_p50_ms: cov.year.ours.p50_ms,
            },
          }
        : null,
      decision_latency_p50_ms: lat
        ? {
            airflow_own: lat.airflow_own.p50_ms,
            ours_into_airflow: lat.ours_into_airflow.p50_ms,
            dagster_own: lat.dagster_own?.p50_ms ?? null,
            ours_into_dagster: lat.ours_into_dagster?.p50_ms ?? null,
          }
        : null,
      events_per_second: at
        ? {
            clients: RATIO_CLIENTS,
            ours: at.ours.events_per_second,
            airflow: at.airflow.events_per_second,
            dagster: at.dagster?.events_per_second ?? null,
            ours_batches_of_1000: eps?.ours_batches_of_1000.events_per_second ?? null,
          }
        : null,
      ...ratios,
      goals,
      goals_met: Object.fromEntries(
        Object.entries(goals).map(([k, goal]) => {
          const value = ratios[k as keyof typeof ratios];
          return [k, value == null ? null : value >= goal];
        }),
      ),
      load_average_1m: { start: loadAtStart, end: load() },
    });
  } finally {
    await ours?.stop();
    await Promise.all([airflow?.stop(), dagster?.stop()]);
    rmSync(namesFile(), { force: true });
  }
}

await main();
