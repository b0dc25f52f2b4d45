/**
 * bench:run-checks: the scheduler's run step (src/scheduler/follow-runs.ts) with BENCH_RUNS open
 * runs (default 1,000) on one Airflow target, against the fake Airflow of the tests. Prints JSON:
 * requests to Airflow per pass while every run is due (bounded whatever the number of runs), how
 * many passes it takes to learn every outcome, and the time of a pass with nothing due (the idle
 * cost that 1,000 open runs add to every scheduler pass), p50/p99 over BENCH_IDLE passes.
 *
 *   npm run bench:run-checks
 */
import { Redis } from 'ioredis';
import { DEFAULT_RUN_POLICY } from '../src/core/runs/runs.js';
import { buildPayload } from '../src/core/runs/trigger.js';
import { createMetrics } from '../src/metrics/registry.js';
import { redisQueues } from '../src/queue/backend.js';
import { followRuns } from '../src/scheduler/follow-runs.js';
import { dagRunId, logicalDate } from '../src/targets/airflow/dag-runs.js';
import { Targets } from '../src/targets/targets.js';
import { startFakeAirflow } from '../test/helpers/fake-airflow.js';
import { createBenchDatabase, DATABASE_CONNECTION, log, quantile, REDIS_URL, round } from './common.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 1000);
const IDLE = Number(process.env.BENCH_IDLE ?? 200);
const HOUR_US = 3_600_000_000;
const BEGIN_US = Date.parse('2026-01-01T00:00:00Z') * 1000;

async function main(): Promise<void> {
  const db = await createBenchDatabase();
  const airflow = await startFakeAirflow();
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const token = airflow.mint('bench', 86_400);
  process.env.BENCH_AIRFLOW_TOKEN = token;
  const target = {
    type: 'airflow',
    url: airflow.url,
    dag_id: 'bench_dag',
    token: { env: 'BENCH_AIRFLOW_TOKEN' },
    timeout: 10_000,
  };
  const targets = new Targets(redisQueues(redis), 'bull', []);
  try {
    const { sql } = db;
    await sql`insert into rollups (id, definition, calendar_hash, definition_hash) values ('bench', '{}', 'x', 'x')`;
    const rows = Array.from({ length: RUNS }, (_, i) => {
      const lo = BEGIN_US + i * HOUR_US;
      const payload = buildPayload({
        rollup: 'bench',
        generation: 1,
        reason: 'covered',
        period: {
          start: new Date(lo / 1000).toISOString(),
          end: new Date((lo + HOUR_US) / 1000).toISOString(),
          key: `k${i}`,
        },
        periodStart: lo,
        domain: 'time',
        upstreams: new Map(),
        decidedAt: new Date(),
      });
      return { lo, payload };
    });
    // A stored run per period: decided, delivered (a dag run exists, running) and open.
    await sql`
      insert into periods (rollup_id, lo, hi, key, state, generation, run_attempt, run_state)
      select 'bench', lo, lo + ${HOUR_US}, 'k' || i, 'triggered', 1, 1, 'running'
      from unnest(${rows.map((r) => r.lo)}::int8[]) with ordinality as t(lo, i)`;
    await sql`
      insert into triggers (rollup_id, period_lo, generation, idempotency_key, reason, lease_token, target, payload, delivered_at)
      select 'bench', t.lo, 1, t.key, 'covered', 1, ${sql.json(target)}, t.payload::jsonb, now()
      from unnest(${rows.map((r) => r.lo)}::int8[], ${rows.map((r) => r.payload.idempotency_key)}::text[],
        ${rows.map((r) => JSON.stringify(r.payload))}::text[]) as t(lo, key, payload)`;
    await sql`
      insert into runs (rollup_id, period_lo, generation, attempt, run_id, state, cause, lease_token, started_at, timeout_at, check_at)
      select rollup_id, period_lo, 1, 1, idempotency_key, 'running', 'trigger', 1, now(), now() + interval '6 hours', now()
      from triggers where rollup_id = 'bench'`;
    await sql`analyze`;
    airflow.runs.set(
      'bench_dag',
      rows.map((r) => ({
        dag_run_id: dagRunId(r.payload.idempotency_key),
        logical_date: logicalDate(r.payload),
        state: 'success' as const,
      })),
    );

    const controller = new AbortController();
    const ctx = {
      sql,
      targets,
      fence: { current: () => ({ token: 1, signal: controller.signal }), verify: async () => {} },
      token: 1,
      log,
      metrics: createMetrics(),
      policyOf: () => DEFAULT_RUN_POLICY,
      targetTypeOf: () => 'airflow',
      rollupOf: () => undefined,
      checks: { openMs: 60_000, watchMs: 600_000 },
    };
    // Every run due: requests per pass until every outcome is known.
    const perPass: number[] = [];
    for (let pass = 0; pass < 50; pass++) {
      const before = airflow.requests.length;
      await followRuns(ctx, controller.signal);
      perPass.push(airflow.requests.length - before);
      const [open] = await sql<{ n: number }[]>`select count(*)::int as n from runs where state = 'running'`;
      if (open!.n === 0) break;
    }
    // Nothing due now (every run checked, retries and timeouts far away): the idle cost.
    await sql`update runs set state = 'running', finished_at = null, check_at = now() + interval '1 hour'`;
    const idle: number[] = [];
    for (let i = 0; i < IDLE; i++) {
      const started = performance.now();
      await followRuns(ctx, controller.signal);
      idle.push(performance.now() - started);
    }
    idle.sort((a, b) => a - b);
    process.stdout.write(
      `${JSON.stringify(
        {
          bench: 'run-checks',
          open_runs: RUNS,
          database: DATABASE_CONNECTION,
          requests_per_pass: perPass,
          passes_to_learn_every_outcome: perPass.length,
          max_requests_per_pass: Math.max(...perPass),
          idle_run_step_ms: {
            p50: round(quantile(idle, 0.5)!),
            p99: round(quantile(idle, 0.99)!),
            passes: IDLE,
          },
        },
        null,
        2,
      )}\n`,
    );
  } finally {
    await targets.close();
    redis.disconnect();
    await airflow.close();
    await db.drop();
  }
}

await main();
