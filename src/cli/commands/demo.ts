import { join } from 'node:path';
import { type Config, loadConfig } from '../../config.js';
import { toCoverageAnswer } from '../../core/coverage-answer.js';
import type { TriggerPayload } from '../../core/trigger.js';
import { startDaemon } from '../../daemon.js';
import { type DemoEvent, demoScript, HOLE, REPROCESSED_HOUR } from '../../demo/producer.js';
import { resolveDatabase } from '../../embedded/resolve.js';
import { findAsset } from '../../index/assets.js';
import { queryCoverage } from '../../index/coverage-query.js';
import { connectOnce } from '../../index/db.js';
import { queueConnection } from '../../ingest/queue-backend.js';
import { deleteKeysWithPrefix, redisConnection } from '../../ingest/redis.js';
import { createLogger } from '../../log.js';
import { packageRoot } from '../../paths.js';
import { formatRatio, plural } from '../format.js';

interface DemoOptions {
  readonly config?: string | undefined;
  readonly serve?: boolean | undefined;
}

const DAY = {
  start: Date.parse('2025-05-31T22:00:00Z') * 1000,
  end: Date.parse('2025-06-01T22:00:00Z') * 1000,
};
const DEMO_DATABASE = 'coverage_rollup_demo';
const DEMO_PREFIX = 'crdemo';
const print = (line: string) => process.stdout.write(`${line}\n`);

/**
 * A minute-long tour: a fresh demo database, the daemon, a simulated producer, and every trigger
 * printed as the downstream worker receives it.
 */
export async function runDemo(values: DemoOptions): Promise<number> {
  const demo = loadConfig({ path: join(packageRoot(), 'config', 'demo.yaml') });
  const log = createLogger(demo.log_level);
  // With neither a database nor a Redis URL, the embedded server of data_dir (the demo's database in it).
  const server = await resolveDatabase(
    values.config === undefined ? demo : loadConfig({ path: values.config }),
    log,
    'command',
  );
  try {
    return await runDemoOn(demoConfig(demo, server.config), log, values);
  } finally {
    await server.release();
  }
}

async function runDemoOn(config: Config, log: ReturnType<typeof createLogger>, values: DemoOptions) {
  const where = config.queue.backend === 'redis' ? `Redis keys ${DEMO_PREFIX}:*` : 'its queues';
  print(`resetting database ${DEMO_DATABASE} and ${where} (the demo's own)`);
  await resetDemoState(config);
  const daemon = await startDaemon(config, log);
  const statusUrl = `${daemon.url.replace('0.0.0.0', '127.0.0.1')}/`;
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
    if (values.serve) print(`  status page: ${statusUrl}`);
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
      print(`serving: open ${statusUrl} (Ctrl-C to stop)`);
      await new Promise<void>((resolve) => {
        process.once('SIGINT', () => resolve());
        process.once('SIGTERM', () => resolve());
      });
    } else {
      print(`run \`npm run demo -- --serve\` to keep the daemon and its status page up.`);
    }
    return 0;
  } finally {
    await downstream.close();
    await producer.close();
    await connection.close();
    await daemon.stop();
  }
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
export function demoConfig(demo: Config, server: Config): Config {
  return {
    ...demo,
    database_url: onDatabase(server.database_url, DEMO_DATABASE),
    redis_url: server.redis_url,
    queue: { ...demo.queue, prefix: DEMO_PREFIX, backend: server.queue.backend },
  };
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
async function resetDemoState(config: Config): Promise<void> {
  const admin = connectOnce(onDatabase(config.database_url, 'postgres'));
  try {
    await admin`drop database if exists ${admin(DEMO_DATABASE)} with (force)`;
  } finally {
    await admin.end();
  }
  if (config.queue.backend !== 'redis') return;
  const redis = redisConnection(config.redis_url);
  try {
    await deleteKeysWithPrefix(redis, config.queue.prefix);
  } finally {
    redis.disconnect();
  }
}
