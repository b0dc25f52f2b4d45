import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { groupOf } from '../../src/core/events/routing.js';
import { queueConnection } from '../../src/queue/backend.js';
import { queueGroups } from '../../src/queue/groups.js';
import { queueSchema } from '../../src/queue/schema.js';
import { createTestDatabase } from '../helpers/db.js';
import { REDIS_URL } from '../helpers/env.js';
import { type DaemonProcess, processHarness } from '../helpers/process.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';
import {
  coverage,
  exampleFile,
  lastJson,
  report,
  runProgram,
  runPython,
  type ScriptResult,
} from './helpers/producers.js';

/**
 * The producers of examples/, run as a user runs them, against the built daemon on each queue
 * backend: Redis, and BullMQ's PostgreSQL backend (the embedded default's store).
 * examples/python_producer.py runs on BullMQ for Python 3.x (the `producers` venv),
 * examples/node_producer.mjs on this package's BullMQ. Three queue groups: the two assets route to
 * different groups, the producer puts each asset's events on its group's queue (checked before a
 * daemon consumes them), the daemon indexes them (read back over GET /v1/assets/{asset}/coverage),
 * an hourly rollup over both assets triggers its webhook once, and a second run of the producer
 * (a redelivery) adds no event and no trigger. examples/http_producer.sh sends through
 * POST /v1/events.
 */

const procs = processHarness();
const GROUPS = 3;
const TOKEN = 'real-producers-token-0123456789';
const DAY_MS = 86_400_000;
// Yesterday's 10:00 UTC hour: a period in the past, so it is due as soon as it is covered.
const yesterday = new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS - DAY_MS);
const BEGIN = yesterday.toISOString().slice(0, 10);
const HOUR_START = `${BEGIN}T10:00:00Z`;
const HOUR_END = `${BEGIN}T11:00:00Z`;
const ASSETS = ['py.orders', 'py.payments'];

type Backend = 'redis' | 'postgres';
type Producer = 'python_producer.py' | 'node_producer.mjs';

function daemonConfig(backend: Backend, databaseUrl: string, prefix: string, hook: string) {
  return {
    database_url: databaseUrl,
    redis_url: REDIS_URL,
    log_level: 'info',
    http: { host: '127.0.0.1', port: 0 },
    api_tokens: [TOKEN],
    queue: { backend, prefix, groups: GROUPS, batch_wait: 'PT0.002S' },
    lease: { ttl: 'PT2S', renew_every: 'PT0.5S', retry_every: 'PT0.2S' },
    shutdown_timeout: 'PT10S',
    rollups: [
      { id: 'hourly', upstream: ASSETS, every: 'hour', begin: BEGIN, target: { type: 'webhook', url: hook } },
    ],
  };
}

/** A URL with the OS user in it, as node-postgres (unlike libpq) does not default to it. */
function withUser(url: string): string {
  const parsed = new URL(url);
  if (!parsed.username) parsed.username = userInfo().username;
  return parsed.toString();
}

function produce(producer: Producer, backend: Backend, databaseUrl: string, prefix: string, label: string) {
  const args = [
    ...['--backend', backend, '--redis-url', REDIS_URL, '--database-url', withUser(databaseUrl)],
    ...['--prefix', prefix, '--groups', String(GROUPS)],
    ...ASSETS.flatMap((a) => ['--asset', a]),
    ...['--start', HOUR_START, '--slices', '12', '--minutes', '5', '--version', 'v1'],
  ];
  const file = exampleFile(producer);
  return producer === 'python_producer.py'
    ? runPython('producers', label, [file, ...args])
    : runProgram(process.execPath, label, [file, ...args]);
}

async function metric(base: string, name: string): Promise<number> {
  const body = await fetch(`${base}/metrics`).then((r) => r.text());
  const line = body.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? 0 : Number(line.split(' ').at(-1));
}

const cases: Array<[Producer, Backend]> = [
  ['python_producer.py', 'redis'],
  ['python_producer.py', 'postgres'],
  ['node_producer.mjs', 'redis'],
  ['node_producer.mjs', 'postgres'],
];

describe.each(cases)('examples/%s on the %s backend', (producer, backend) => {
  it('routes each asset to its group, the daemon indexes the events and the hourly rollup triggers once', async () => {
    expect(new Set(ASSETS.map((a) => groupOf(a, GROUPS))).size).toBe(ASSETS.length);
    const db = await createTestDatabase();
    const prefix = createTestPrefix();
    const sink = await startWebhookSink();
    const label = `${producer.split('.')[0]}-${backend}`;
    let daemon: DaemonProcess | undefined;
    try {
      const raw = daemonConfig(backend, db.url, prefix, sink.url);
      const config = parseConfig(raw);

      // 1. The producer, before any daemon runs: its jobs wait in the queues it chose.
      const produced: ScriptResult = await produce(producer, backend, db.url, prefix, label);
      const sent = lastJson<{ sent: Record<string, number> }>(produced.stdout).sent;
      const groups = queueGroups(config.queue);
      const expected = Object.fromEntries(
        ASSETS.map((a) => {
          const p = groups[groupOf(a, GROUPS)]!.prefix;
          return [backend === 'redis' ? p : queueSchema(p), 12];
        }),
      );
      expect(sent).toEqual(expected);
      const connection = queueConnection(config);
      try {
        for (const group of groups) {
          const queue = connection.queue(config.queue.name, group.prefix);
          try {
            const counts = await queue.getJobCounts('waiting', 'delayed', 'prioritized');
            const waiting = (counts.waiting ?? 0) + (counts.delayed ?? 0) + (counts.prioritized ?? 0);
            const mine = ASSETS.filter((a) => groupOf(a, GROUPS) === group.index).length * 12;
            expect(waiting, `jobs waiting in group ${group.index} (${group.prefix})`).toBe(mine);
          } finally {
            await queue.close();
          }
        }
      } finally {
        await connection.close();
      }

      // 2. The daemon consumes every group, indexes the events, and the rollup triggers.
      const started = Date.now();
      const running = await procs.spawn({ name: label, config: raw });
      daemon = running;
      for (const asset of ASSETS) {
        const answer = await waitFor(
          async () => {
            const c = await coverage(running.url!, asset, HOUR_START, HOUR_END);
            return c.covered ? c : null;
          },
          { timeout: 60_000, interval: 100, what: `${asset} covered` },
        );
        expect(answer).toMatchObject({ covered: true, ratio: 1, missing: [] });
      }
      const indexedMs = Date.now() - started;
      const call = await waitFor(() => sink.calls.find((c) => c.body.rollup === 'hourly'), {
        timeout: 60_000,
        interval: 50,
        what: 'the hourly webhook',
      });
      const triggeredMs = call.at - started;
      const period = call.body.period as { start: string; end: string; key: string };
      expect(call.body).toMatchObject({ rollup: 'hourly', generation: 1, reason: 'covered' });
      expect(Date.parse(period.start)).toBe(Date.parse(HOUR_START));
      expect(Date.parse(period.end)).toBe(Date.parse(HOUR_END));
      expect(call.key).toBe(call.body.idempotency_key);
      const upstreams = call.body.upstreams as Record<string, { ratio: number; versions: string[] }>;
      for (const asset of ASSETS) expect(upstreams[asset]).toMatchObject({ ratio: 1, versions: ['v1'] });

      // 3. A second run of the producer (a redelivery of the same slices) changes nothing.
      await produce(producer, backend, db.url, prefix, `${label}-again`);
      await waitFor(
        async () =>
          (await metric(running.url!, 'coverage_rollup_events_ingested_total{status="duplicate"}')) === 24,
        { timeout: 60_000, interval: 200, what: 'the 24 redelivered events seen as duplicates' },
      );
      expect(await metric(running.url!, 'coverage_rollup_events_ingested_total{status="committed"}')).toBe(
        24,
      );
      expect(sink.calls.filter((c) => c.body.rollup === 'hourly')).toHaveLength(1);
      const body = await fetch(`${running.url}/metrics`).then((r) => r.text());
      expect(body).not.toMatch(/^coverage_rollup_events_rejected_total\{[^}]*\} [1-9]/m);
      expect((await running.stop()).code).toBe(0);
      report(
        `${producer} on ${backend}: 24 events (12 x 5 min per asset, per group ${JSON.stringify(sent)}) ` +
          `sent in ${produced.ms} ms; daemon start to both assets covered ${indexedMs} ms, to the ` +
          `webhook for ${call.body.idempotency_key} ${triggeredMs} ms; the redelivery added no event and no trigger`,
      );
    } finally {
      await daemon?.stop();
      await sink.close();
    }
  });
});

describe.each<Producer>(['python_producer.py', 'node_producer.mjs'])(
  'examples/%s beside a daemon',
  (producer) => {
    it('reaches the daemon through its record alone: its database, queue prefix and groups, no URL or option', async () => {
      const db = await createTestDatabase();
      const prefix = createTestPrefix();
      const sink = await startWebhookSink();
      const dataDir = mkdtempSync(join(tmpdir(), 'cr-beside-'));
      const label = `${producer.split('.')[0]}-beside`;
      // The record holds a database URL only without a password; node-postgres needs the user named.
      const raw = { ...daemonConfig('postgres', withUser(db.url), prefix, sink.url), data_dir: dataDir };
      const groups = queueGroups(parseConfig(raw).queue);
      const running = await procs.spawn({ name: label, config: raw });
      try {
        const env = {
          COVERAGE_ROLLUP_DATA_DIR: dataDir,
          DATABASE_URL: undefined,
          REDIS_URL: undefined,
          QUEUE_BACKEND: undefined,
        };
        const args = [exampleFile(producer), ...ASSETS.flatMap((a) => ['--asset', a]), '--start', HOUR_START];
        const produced =
          producer === 'python_producer.py'
            ? await runPython('producers', label, args, env)
            : await runProgram(process.execPath, label, args, env);
        expect(lastJson<{ backend: string; sent: Record<string, number> }>(produced.stdout)).toMatchObject({
          backend: 'postgres',
          sent: Object.fromEntries(ASSETS.map((a) => [queueSchema(groups[groupOf(a, GROUPS)]!.prefix), 12])),
        });
        for (const asset of ASSETS)
          await waitFor(async () => (await coverage(running.url!, asset, HOUR_START, HOUR_END)).covered, {
            timeout: 60_000,
            interval: 100,
            what: `${asset} covered`,
          });
        await waitFor(() => sink.calls.find((c) => c.body.rollup === 'hourly'), {
          timeout: 60_000,
          what: 'the hourly webhook',
        });
        // An empty URL counts as unset, as the daemon reads it; with no daemon recorded either it is
        // refused, never read as libpq's defaults (the local server, the user's database).
        const nowhere = { ...env, DATABASE_URL: '', COVERAGE_ROLLUP_DATA_DIR: join(dataDir, 'none') };
        const empty =
          producer === 'python_producer.py'
            ? runPython('producers', `${label}-empty`, args, nowhere)
            : runProgram(process.execPath, `${label}-empty`, args, nowhere);
        await expect(empty).rejects.toThrow(
          /an empty URL is refused|no DATABASE_URL and no daemon recorded here/,
        );
        expect((await running.stop()).code).toBe(0);
        report(
          `${producer} beside a daemon: found it through ${dataDir}/daemon.json; both assets covered, the hourly webhook sent`,
        );
      } finally {
        await running.stop();
        await sink.close();
        rmSync(dataDir, { recursive: true, force: true });
      }
    });
  },
);

describe.each<Backend>(['redis', 'postgres'])('examples/http_producer.sh on the %s backend', (backend) => {
  it('sends through POST /v1/events and the hourly rollup triggers once', async () => {
    const db = await createTestDatabase();
    const prefix = createTestPrefix();
    const sink = await startWebhookSink();
    const running = await procs.spawn({
      name: `http-producer-${backend}`,
      config: daemonConfig(backend, db.url, prefix, sink.url),
    });
    try {
      const started = Date.now();
      for (const asset of ASSETS) {
        const sent = await runProgram(
          'sh',
          `http-producer-${backend}-${asset}`,
          [exampleFile('http_producer.sh'), asset, HOUR_START, HOUR_END, 'v1'],
          { COVERAGE_ROLLUP_URL: running.url!, COVERAGE_ROLLUP_TOKEN: TOKEN },
        );
        expect(lastJson<{ accepted: number }>(sent.stdout).accepted).toBe(1);
      }
      const call = await waitFor(() => sink.calls.find((c) => c.body.rollup === 'hourly'), {
        timeout: 60_000,
        interval: 50,
        what: 'the hourly webhook',
      });
      expect(call.body).toMatchObject({ generation: 1, reason: 'covered' });
      for (const asset of ASSETS)
        expect(await coverage(running.url!, asset, HOUR_START, HOUR_END)).toMatchObject({ covered: true });
      expect((await running.stop()).code).toBe(0);
      report(
        `http_producer.sh on ${backend}: 2 events (one hour per asset) through POST /v1/events; ` +
          `the webhook for ${call.body.idempotency_key} ${call.at - started} ms after the first curl`,
      );
    } finally {
      await running.stop();
      await sink.close();
    }
  });
});
