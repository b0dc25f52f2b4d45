import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config.js';
import { groupOf } from '../../src/core/routing.js';
import { queueGroups } from '../../src/ingest/groups.js';
import { queueConnection } from '../../src/ingest/queue-backend.js';
import { queueSchema } from '../../src/ingest/queue-schema.js';
import { createTestDatabase } from '../helpers/db.js';
import { REDIS_URL } from '../helpers/env.js';
import { type DaemonProcess, processHarness } from '../helpers/process.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';
import { coverage, exampleFile, lastJson, report, runPython } from './helpers/producers.js';

/**
 * examples/python_producer.py, run as a user runs it (BullMQ for Python 3.x from the `producers`
 * venv), against the built daemon on each queue backend: Redis, and BullMQ's PostgreSQL backend
 * (the embedded default's store). Three queue groups: the two assets route to different groups,
 * the producer puts each asset's events on its group's queue (checked before the daemon consumes
 * them), the daemon indexes them (read back over GET /v1/assets/{asset}/coverage) and an hourly
 * rollup over both assets triggers its webhook once.
 */

const procs = processHarness();
const GROUPS = 3;
const DAY_MS = 86_400_000;
// Yesterday's 10:00 UTC hour: a period in the past, so it is due as soon as it is covered.
const yesterday = new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS - DAY_MS);
const BEGIN = yesterday.toISOString().slice(0, 10);
const HOUR_START = `${BEGIN}T10:00:00Z`;
const HOUR_END = `${BEGIN}T11:00:00Z`;
const ASSETS = ['py.orders', 'py.payments'];

type Backend = 'redis' | 'postgres';

describe.each<Backend>(['redis', 'postgres'])('examples/python_producer.py on the %s backend', (backend) => {
  it('routes each asset to its group, the daemon indexes the events and the hourly rollup triggers once', async () => {
    expect(new Set(ASSETS.map((a) => groupOf(a, GROUPS))).size).toBe(ASSETS.length);
    const db = await createTestDatabase();
    const prefix = createTestPrefix();
    const sink = await startWebhookSink();
    let daemon: DaemonProcess | undefined;
    try {
      const raw = {
        database_url: db.url,
        redis_url: REDIS_URL,
        log_level: 'info',
        http: { host: '127.0.0.1', port: 0 },
        queue: { backend, prefix, groups: GROUPS, batch_wait: 'PT0.002S' },
        lease: { ttl: 'PT2S', renew_every: 'PT0.5S', retry_every: 'PT0.2S' },
        shutdown_timeout: 'PT10S',
        rollups: [
          {
            id: 'py_hourly',
            upstream: ASSETS,
            every: 'hour',
            timezone: 'UTC',
            begin: BEGIN,
            target: { type: 'webhook', url: sink.url },
          },
        ],
      };
      const config = parseConfig(raw);

      // 1. The producer, before any daemon runs: its jobs wait in the queues it chose.
      const produced = await runPython('producers', `python-producer-${backend}`, [
        exampleFile('python_producer.py'),
        ...['--backend', backend, '--redis-url', REDIS_URL, '--database-url', db.url],
        ...['--prefix', prefix, '--groups', String(GROUPS)],
        ...ASSETS.flatMap((a) => ['--asset', a]),
        ...['--start', HOUR_START, '--slices', '12', '--minutes', '5', '--version', 'v1'],
      ]);
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
      const running = await procs.spawn({ name: `python-producer-${backend}`, config: raw });
      daemon = running;
      for (const asset of ASSETS) {
        const answer = await waitFor(
          async () => {
            const c = await coverage(running.url!, asset, HOUR_START, HOUR_END);
            return c.covered ? c : null;
          },
          { timeout: 60_000, interval: 200, what: `${asset} covered` },
        );
        expect(answer).toMatchObject({ covered: true, ratio: 1, missing: [] });
      }
      const indexedMs = Date.now() - started;
      const call = await waitFor(() => sink.calls.find((c) => c.body.rollup === 'py_hourly'), {
        timeout: 60_000,
        interval: 100,
        what: 'the py_hourly webhook',
      });
      const triggeredMs = Date.now() - started;
      const period = call.body.period as { start: string; end: string; key: string };
      expect(call.body).toMatchObject({ rollup: 'py_hourly', generation: 1, reason: 'covered' });
      expect(Date.parse(period.start)).toBe(Date.parse(HOUR_START));
      expect(Date.parse(period.end)).toBe(Date.parse(HOUR_END));
      expect(call.key).toBe(call.body.idempotency_key);
      const upstreams = call.body.upstreams as Record<string, { ratio: number; versions: string[] }>;
      for (const asset of ASSETS) expect(upstreams[asset]).toMatchObject({ ratio: 1, versions: ['v1'] });

      // A second run of the producer (a redelivery of the same slices) changes nothing.
      await runPython('producers', `python-producer-${backend}-again`, [
        exampleFile('python_producer.py'),
        ...['--backend', backend, '--redis-url', REDIS_URL, '--database-url', db.url],
        ...['--prefix', prefix, '--groups', String(GROUPS)],
        ...ASSETS.flatMap((a) => ['--asset', a]),
        ...['--start', HOUR_START, '--slices', '12', '--minutes', '5', '--version', 'v1'],
      ]);
      const metric = async (name: string) => {
        const body = await fetch(`${running.url}/metrics`).then((r) => r.text());
        const line = body.split('\n').find((l) => l.startsWith(`${name} `));
        return line === undefined ? 0 : Number(line.split(' ').at(-1));
      };
      await waitFor(
        async () => (await metric('coverage_rollup_events_ingested_total{status="duplicate"}')) === 24,
        {
          timeout: 60_000,
          interval: 200,
          what: 'the 24 redelivered events seen as duplicates',
        },
      );
      expect(await metric('coverage_rollup_events_ingested_total{status="committed"}')).toBe(24);
      expect(sink.calls.filter((c) => c.body.rollup === 'py_hourly')).toHaveLength(1);
      const body = await fetch(`${running.url}/metrics`).then((r) => r.text());
      expect(body).not.toMatch(/^coverage_rollup_events_rejected_total\{[^}]*\} [1-9]/m);
      const exit = await running.stop();
      expect(exit.code).toBe(0);
      report(
        `python_producer.py on ${backend}: 24 events (12 x 5 min per asset, groups ${JSON.stringify(sent)}) ` +
          `sent in ${produced.ms} ms; daemon start to both assets covered ${indexedMs} ms, to the ` +
          `webhook for ${call.body.idempotency_key} ${triggeredMs} ms; the redelivery added no event and no trigger`,
      );
    } finally {
      await daemon?.stop();
      await sink.close();
    }
  });
});
