/**
 * bench:sensor: from the commit that covers a window to the end of the Airflow task that waits on
 * it, for the provider's CoverageSensor deferred (its trigger waits on the daemon's waiting coverage
 * call and ends the task in the triggerer) against the same sensor polling in reschedule mode every
 * BENCH_POKE_SECONDS (default 10). BENCH_ROUNDS windows each (default 5), one at a time, in the real
 * Airflow 3.3 of `npm run test:real` with the wheels it built and installed (examples/airflow/
 * coverage_sensor.py), against the built daemon on Redis. The commit is the covering event's
 * `last_event_at` in the daemon's answer, the end the task instance's `end_date` (one clock).
 * Prints JSON.
 *
 *   npm run test:real -- test/real/airflow-sensor.real.test.ts   # once: the venvs and the wheels
 *   npm run bench:sensor
 */
import { join } from 'node:path';
import { packageRoot } from '../src/support/paths.js';
import { type RealAirflow, startAirflow } from '../test/real/helpers/airflow.js';
import {
  createBenchDatabase,
  dropPrefix,
  quantile,
  REDIS_URL,
  round,
  spawnDaemon,
  uniqueName,
} from './common.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const POKE_SECONDS = Number(process.env.BENCH_POKE_SECONDS ?? 10);
const TOKEN = 'bench-sensor-token-0123456789abcdef';
const DAY = new Date(Date.now() - 3 * 86_400_000).toISOString().slice(0, 10);
const at = (h: number, m = 0) => `${DAY}T${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}:00Z`;

type Mode = 'deferred' | 'reschedule';
/** When the task logged that the window is covered (for the deferred sensor: its trigger did). */
async function coveredLoggedAt(airflow: RealAirflow, dag: string, run: string): Promise<number | null> {
  const answer = await airflow.api('GET', `/api/v2/dags/${dag}/dagRuns/${run}/taskInstances/covered/logs/1`);
  const lines = (answer.body.content ?? []) as Array<{ event?: string; timestamp?: string } | string>;
  for (const line of lines) {
    if (typeof line !== 'string' && line.event?.includes(') covered (ratio') && line.timestamp) {
      return Date.parse(line.timestamp);
    }
  }
  return null;
}

const DAGS: Record<Mode, { dag: string; waiting: string }> = {
  deferred: { dag: 'coverage_sensor', waiting: 'deferred' },
  reschedule: { dag: 'coverage_sensor_reschedule', waiting: 'up_for_reschedule' },
};

async function until<T>(check: () => Promise<T | undefined>, what: string, timeoutMs = 300_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function main(): Promise<void> {
  const db = await createBenchDatabase();
  const prefix = uniqueName('crbench');
  const daemon = await spawnDaemon(
    {
      database_url: db.url,
      redis_url: REDIS_URL,
      http: { host: '127.0.0.1', port: 0 },
      api_tokens: [TOKEN],
      queue: { backend: 'redis', prefix, batch_wait: 'PT0.002S' },
    },
    { compiled: true },
  );
  let airflow: RealAirflow | undefined;
  try {
    const send = async (asset: string, start: string, end: string) => {
      const response = await fetch(`${daemon.url}/v1/events`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ asset, start, end, version: 'v1' }),
      });
      if (response.status >= 300) throw new Error(`POST /v1/events: ${response.status}`);
    };
    airflow = await startAirflow({
      name: 'bench-sensor',
      dagFiles: [join(packageRoot(), 'examples', 'airflow', 'coverage_sensor.py')],
      dagIds: Object.values(DAGS).map((d) => d.dag),
      env: {
        AIRFLOW_CONN_COVERAGE_ROLLUP_DEFAULT: JSON.stringify({
          conn_type: 'coverage_rollup',
          host: daemon.url,
          password: TOKEN,
        }),
        COVERAGE_POKE_SECONDS: String(POKE_SECONDS),
      },
    });
    const api = airflow.api;
    const results: Record<Mode, number[]> = { deferred: [], reschedule: [] };
    // Deferred only: commit to the trigger's "covered" line (the daemon's waiting call and the
    // trigger), and that line to the task's end (Airflow handing the trigger's event on).
    const learnt: number[] = [];
    const handedOn: number[] = [];
    for (let round_ = 0; round_ < ROUNDS; round_++) {
      for (const mode of ['deferred', 'reschedule'] as const) {
        const { dag, waiting } = DAGS[mode];
        const asset = `bench.${mode}.${round_}`;
        const run = `bench_${mode}_${round_}`;
        const hour = round_ % 23;
        await send(asset, at(hour), at(hour, 30));
        const created = await api('POST', `/api/v2/dags/${dag}/dagRuns`, {
          dag_run_id: run,
          logical_date: at(hour),
          data_interval_start: at(hour),
          data_interval_end: at(hour + 1),
          conf: { asset },
        });
        if (created.status !== 200) throw new Error(`dagRuns: ${JSON.stringify(created.body)}`);
        const ti = `/api/v2/dags/${dag}/dagRuns/${run}/taskInstances/covered`;
        await until(
          async () => ((await api('GET', ti)).body.state === waiting ? true : undefined),
          `${run} ${waiting}`,
        );
        // Somewhere in the poke cycle, as a producer's commit would land.
        await new Promise((r) => setTimeout(r, Math.random() * POKE_SECONDS * 1000));
        await send(asset, at(hour, 30), at(hour + 1));
        const done = await until(async () => {
          const body = (await api('GET', ti)).body;
          return body.state === 'success' ? body : undefined;
        }, `${run} to succeed`);
        const q = new URLSearchParams({ start: at(hour), end: at(hour + 1) });
        const coverage = (await fetch(`${daemon.url}/v1/assets/${asset}/coverage?${q}`).then((r) =>
          r.json(),
        )) as {
          covered: boolean;
          last_event_at: string;
        };
        if (!coverage.covered) throw new Error(`${asset} not covered`);
        const committed = Date.parse(coverage.last_event_at);
        const ended = Date.parse(done.end_date as string);
        results[mode].push(ended - committed);
        if (mode === 'deferred') {
          const logged = await coveredLoggedAt(airflow, dag, run);
          if (logged !== null) {
            learnt.push(logged - committed);
            handedOn.push(ended - logged);
          }
        }
      }
    }
    const stats = (ms: number[]) => {
      const sorted = [...ms].sort((a, b) => a - b);
      return { rounds: ms.length, p50_ms: quantile(sorted, 0.5), max_ms: sorted.at(-1), ms };
    };
    const deferred = stats(results.deferred);
    const reschedule = stats(results.reschedule);
    console.log(
      JSON.stringify(
        {
          bench: 'sensor',
          what: 'covering commit (last_event_at) to the sensor task end (end_date), real Airflow 3.3',
          poke_seconds: POKE_SECONDS,
          deferred,
          deferred_commit_to_trigger: stats(learnt),
          deferred_trigger_to_task_end: stats(handedOn),
          reschedule,
          reschedule_over_deferred_p50: round(
            (reschedule.p50_ms ?? 0) / Math.max(1, deferred.p50_ms ?? 1),
            1,
          ),
        },
        null,
        2,
      ),
    );
  } finally {
    await airflow?.stop();
    await daemon.stop();
    await dropPrefix(prefix);
    await db.drop();
  }
}

await main();
