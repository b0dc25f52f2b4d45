import { userInfo } from 'node:os';
import { join } from 'node:path';
import { type Config, loadConfig } from '../../config/index.js';
import { toCoverageAnswer } from '../../core/intervals/coverage-answer.js';
import type { TriggerPayload } from '../../core/runs/trigger.js';
import { startDaemon } from '../../daemon/daemon.js';
import { resolveDatabase } from '../../embedded/resolve.js';
import { queueConnection } from '../../queue/backend.js';
import { deleteKeysWithPrefix, redisConnection } from '../../queue/redis.js';
import { findAsset } from '../../store/assets/assets.js';
import { queryCoverage } from '../../store/assets/coverage-query.js';
import { dropDatabase } from '../../store/pg/db.js';
import { createLogger, daemonDestination } from '../../support/log.js';
import { packageRoot } from '../../support/paths.js';
import { chainDemoConfig, runChainDemo } from '../demo/chain.js';
import { type DemoEvent, demoScript, HOLE, REPROCESSED_HOUR } from '../demo/producer.js';
import { formatRatio, plural } from '../format.js';

interface DemoOptions {
  readonly config?: string | undefined;
  readonly serve?: boolean | undefined;
  readonly chain?: boolean | undefined;
  readonly database?: string | undefined;
}

const DAY = {
  start: Date.parse('2025-05-31T22:00:00Z') * 1000,
  end: Date.parse('2025-06-01T22:00:00Z') * 1000,
};
/** Every demo database's name starts so: the demo drops and recreates it, so it may name no other. */
const DEMO_DATABASE = 'coverage_rollup_demo';
const DEMO_PREFIX = 'crdemo';
const print = (line: string) => process.stdout.write(`${line}\n`);

/**
 * A minute-long tour: a fresh demo database, the daemon, a simulated producer, and every trigger
 * printed as the downstream worker receives it.
 */
export async function runDemo(values: DemoOptions): Promise<number> {
  const database = values.database ?? defaultDemoDatabase();
  if (!isDemoDatabase(database)) {
    process.stderr.write(
      `coverage-rollup demo: --database must start with ${DEMO_DATABASE} and hold only a-z, 0-9 and _ (at most 63 characters), since the demo drops and recreates it (got ${database})\n`,
    );
    return 2;
  }
  const demo = loadConfig({ path: join(packageRoot(), 'config', 'demo.yaml') });
  const log = createLogger(demo.log_level, daemonDestination(demo.log_format));
  // With neither a database nor a Redis URL, the embedded server of data_dir (the demo's database in it).
  const server = await resolveDatabase(
    values.config === undefined ? demo : loadConfig({ path: values.config }),
    log,
    'command',
  );
  try {
    const base = demoConfig(demo, server.config, database);
    const config = values.chain
      ? chainDemoConfig(loadConfig({ path: join(packageRoot(), 'config', 'chain.yaml'), env: {} }), base)
      : base;
    return await runDemoOn(config, log, values, database);
  } finally {
    await server.release();
  }
}

async function runDemoOn(
  config: Config,
  log: ReturnType<typeof createLogger>,
  values: DemoOptions,
  database: string,
) {
  const where = config.queue.backend === 'redis' ? `Redis keys ${config.queue.prefix}:*` : 'its queues';
  print(`resetting database ${database} and ${where} (the demo's own)`);
  await resetDemoState(config, database);
  const daemon = await startDaemon(config, log);
  const statusUrl = `${daemon.url.replace('0.0.0.0', '127.0.0.1')}/`;
  // The page opens on the last day by default; the demo's story is 2025-06-01 in Berlin.
  const storyUrl = `${statusUrl}?start=${iso(DAY.start)}&end=${iso(DAY.end)}`;
  if (values.chain) {
    try {
      await runChainDemo(daemon, config, print, values.serve ? statusUrl : undefined);
      await serveOrExit(values.serve === true, statusUrl, '--chain --serve');
      return 0;
    } finally {
      await daemon.stop();
    }
  }
  const connection = queueConnection(config);
  const producer = connection.queue(config.queue.name, config.queue.prefix);
  const received: TriggerPayload[] = [];
  const downstream = connection.worker<TriggerPayload>(
    'demo-runs',
    config.queue.prefix,
    async (job) => {
      const p = job.data;
      received.push(p);
      const ratios = Object.entries(p.upstreams)
        .map(([a, u]) => `${a} ${formatRatio(u.ratio)}`)
        .join(', ');
      print(
        `  trigger  ${p.rollup.padEnd(14)} ${p.period.key.padEnd(14)} generation ${p.generation}  ${p.reason.padEnd(7)} (${ratios})`,
      );
    },
    { concurrency: 1 },
  );
  const waitFor = async (what: string, done: () => boolean) => {
    const deadline = Date.now() + 30_000;
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`demo: timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const send = (events: readonly DemoEvent[]) =>
    producer.addBulk(events.map((data) => ({ name: 'event', data })));
  const hourly = (generation: number) =>
    received.filter((p) => p.rollup === 'orders_hourly' && p.generation === generation).length;

  try {
    const script = demoScript();
    print(
      `coverage-rollup demo: one Berlin day (2025-06-01) of 5-minute micro-batches for demo.orders and demo.payments`,
    );
    if (values.serve) print(`  status page of the demo day: ${storyUrl}`);
    print(
      `streaming the day hour by hour (the orders slice ${hhmm(HOLE.start)}-${hhmm(HOLE.end)} is held back):`,
    );
    for (const hour of script.hours) {
      await send(hour);
      await new Promise((r) => setTimeout(r, 120)); // pacing, so triggers show up as the day streams
    }
    await waitFor('23 hourly triggers', () => hourly(1) >= 23);
    print(`late fill of the held-back ${hhmm(HOLE.start)}-${hhmm(HOLE.end)} orders slice:`);
    await send(script.lateFill);
    await waitFor(
      'the hole hour and the daily trigger',
      () => hourly(1) >= 24 && received.some((p) => p.rollup === 'sales_daily'),
    );
    print(
      `orders ${hhmm(REPROCESSED_HOUR.start)}-${hhmm(REPROCESSED_HOUR.end)} reprocessed at v2 as one event (rerun: on_update):`,
    );
    await send([script.reprocess]);
    await waitFor('the rerun', () => hourly(2) >= 1);

    print('final coverage of 2025-06-01 (Europe/Berlin):');
    for (const name of ['demo.orders', 'demo.payments']) {
      const asset = (await findAsset(daemon.sql, name))!;
      const coverage = await queryCoverage(daemon.sql, asset, { window: DAY, limit: 1000 });
      const answer = toCoverageAnswer(
        { asset: name, domain: asset.domain, window: DAY, coverage, ...coverage },
        Date.now(),
      );
      const versions = [...new Set(answer.batches.map((b) => b.version))].join(', ');
      print(
        `  ${name.padEnd(14)} covered ${answer.covered}, ratio ${formatRatio(answer.ratio)}, ${plural(asset.event_count, 'event')} -> ${plural(asset.segment_count, 'segment')} (versions ${versions})`,
      );
    }
    print(`${received.length} triggers delivered to the demo-runs queue.`);
    if (values.serve) {
      print(`serving: open ${storyUrl} (the demo day: its 24 hourly triggers and the rerun; Ctrl-C to stop)`);
      await new Promise<void>((resolve) => {
        process.once('SIGINT', () => resolve());
        process.once('SIGTERM', () => resolve());
      });
    } else {
      print(
        `run \`npm run demo -- --serve\` to keep the daemon up and open its status page on the demo day (/?start=${iso(DAY.start)}&end=${iso(DAY.end)}).`,
      );
    }
    return 0;
  } finally {
    await downstream.close();
    await producer.close();
    await connection.close();
    await daemon.stop();
  }
}

/** With --serve, keeps the daemon up until Ctrl-C (or SIGTERM); otherwise says how to. */
async function serveOrExit(serve: boolean, statusUrl: string, flags = '--serve'): Promise<void> {
  if (!serve) {
    print(`run \`npm run demo -- ${flags}\` to keep the daemon and its status page up.`);
    return;
  }
  print(`serving: open ${statusUrl} (Ctrl-C to stop)`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', () => resolve());
    process.once('SIGTERM', () => resolve());
  });
}

function hhmm(ms: number): string {
  return new Date(ms).toLocaleTimeString('en-GB', {
    timeZone: 'Europe/Berlin',
    hour: '2-digit',
    minute: '2-digit',
  });
}

/**
 * The demo recreates its database and deletes its queue keys, and runs its own rollups and
 * targets. From `server` (the --config file, or DATABASE_URL and REDIS_URL) it takes only where
 * PostgreSQL and Redis are: it must never drop or trigger anything real.
 */
export function demoConfig(demo: Config, server: Config, database = DEMO_DATABASE): Config {
  return {
    ...demo,
    database_url: onDatabase(server.database_url, database),
    redis_url: server.redis_url,
    // coverage_rollup_demo_alice -> crdemo_alice: two demos on one Redis never share keys either.
    queue: {
      ...demo.queue,
      prefix: `${DEMO_PREFIX}${database.slice(DEMO_DATABASE.length)}`,
      backend: server.queue.backend,
    },
  };
}

/** One demo per user on a shared server: coverage_rollup_demo_<user>, else per run. */
export function defaultDemoDatabase(user = userName()): string {
  const suffix = user
    .toLowerCase()
    .replace(/[^a-z0-9_]+/g, '_')
    .slice(0, 63 - DEMO_DATABASE.length - 1);
  return `${DEMO_DATABASE}_${suffix || `run${process.pid}`}`;
}

export function isDemoDatabase(name: string): boolean {
  return name.startsWith(DEMO_DATABASE) && /^[a-z0-9_]{1,63}$/.test(name);
}

function userName(): string {
  try {
    return userInfo().username;
  } catch {
    return ''; // no passwd entry (some containers): per run instead
  }
}

function iso(microseconds: number): string {
  return new Date(microseconds / 1000).toISOString().replace('.000Z', 'Z');
}

/** The URL of another database on the same server; libpq-style parameters naming one are dropped. */
function onDatabase(databaseUrl: string, name: string): string {
  const url = new URL(databaseUrl);
  url.pathname = `/${name}`;
  for (const param of ['database', 'db', 'dbname']) url.searchParams.delete(param);
  return url.toString();
}

/**
 * Every run starts from nothing: the demo database is recreated (with the queues in it, on the
 * PostgreSQL backend) and, on Redis, its queue keys deleted.
 */
async function resetDemoState(config: Config, database: string): Promise<void> {
  await dropDatabase(onDatabase(config.database_url, 'postgres'), database);
  if (config.queue.backend !== 'redis') return;
  const redis = redisConnection(config.redis_url);
  try {
    await deleteKeysWithPrefix(redis, config.queue.prefix);
  } finally {
    redis.disconnect();
  }
}
