/**
 * Repair requests across a kill -9 of the lease holder, with real daemon processes
 * (the built `coverage-rollup start`) on one database. The repair target is a webhook whose
 * answers the test decides: while the holder leads, every delivery hangs, so the holder is killed
 * with attempts committed in its fenced transaction (the repair_attempts outbox) and their
 * deliveries unanswered. The standby takes over and delivers them again. At the webhook, every
 * (request, attempt) is accepted exactly once, under one idempotency key and one body, and no
 * asset range is requested twice: the standby's fresh scan finds the killed holder's requests.
 * Then a producer fills one period's holes and the standby sees its requests repaired.
 *
 * Time is real: periods are PT2S long and begin in a moment (repair is for time rollups); every
 * wait is on a condition.
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { formatTime } from '../../src/core/bounds.js';
import { testProducer } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { REDIS_URL, withTestBackend } from '../helpers/env.js';
import { type DaemonProcess, type LogLine, processHarness } from '../helpers/process.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const procs = processHarness();
const db = await createTestDatabase();
const prefix = createTestPrefix();
const producer = testProducer(
  parseConfig(withTestBackend({ database_url: db.url, redis_url: REDIS_URL, queue: { prefix } })),
);

const ACQUIRED = 'acquired the scheduler lease';
const DELIVERED = 'repair request delivered';
const PERIOD_MS = 2000;
const begin = Math.ceil((Date.now() + 3000) / PERIOD_MS) * PERIOD_MS;
const iso = (ms: number) => formatTime(ms * 1000);
const tokenOf = (line: LogLine) => line.fencingToken as number;

interface Hit {
  readonly key: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: { idempotency_key: string; attempt: number; asset: string; ranges: unknown[] };
  readonly answer: 200 | 'hang';
}

/** The producer's webhook: hangs every request while `hang` is set, else accepts it (200). */
async function webhook() {
  const hits: Hit[] = [];
  const hanging = new Set<ServerResponse>();
  const state = { hits, url: '', hang: true };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Hit['body'];
      const answer = state.hang ? 'hang' : 200;
      hits.push({ key: String(req.headers['idempotency-key']), headers: req.headers, body, answer });
      if (answer === 'hang') {
        hanging.add(res);
        res.on('close', () => hanging.delete(res));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/backfill`;
  const close = async () => {
    for (const res of hanging) res.destroy();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return { state, close };
}

interface AttemptRow {
  request_id: number;
  attempt: number;
  idempotency_key: string;
  lease_token: number;
  deliveries: number;
  delivered_at: Date | null;
  payload: unknown;
}
const attemptRows = () =>
  db.sql<AttemptRow[]>`
    select request_id, attempt, idempotency_key, lease_token, deliveries, delivered_at, payload
    from repair_attempts order by request_id, attempt`;

/** Per idempotency key, how many `msg` lines name it across processes. */
function countByKey(processes: readonly DaemonProcess[], msg: string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const p of processes)
    for (const line of p.logs(msg)) {
      const key = String(line.idempotency_key);
      counts[key] = (counts[key] ?? 0) + 1;
    }
  return counts;
}

describe('repair requests across a kill -9 of the lease holder', () => {
  it('the standby delivers what the killed holder decided: one accepted delivery per (request, attempt), one request per range', async () => {
    const hook = await webhook();
    try {
      const config = {
        database_url: db.url,
        redis_url: REDIS_URL,
        log_level: 'info',
        http: { host: '127.0.0.1', port: 0 },
        queue: { prefix, batch_wait: 'PT0.002S' },
        lease: { ttl: 'PT1S', renew_every: 'PT0.3S', retry_every: 'PT0.2S' },
        shutdown_timeout: 'PT10S',
        rollups: [
          {
            id: 'rk',
            upstream: ['rk.a', 'rk.b'],
            every: `PT${PERIOD_MS / 1000}S`,
            begin: new Date(begin).toISOString(),
            target: { type: 'queue', queue: 'rk-runs' },
            // One attempt an hour: every attempt the test sees is an attempt 1.
            repair: {
              after: 'PT1S',
              every: 'PT1H',
              target: { type: 'webhook', url: hook.state.url, timeout: 'PT60S' },
            },
          },
        ],
      };
      const a = await procs.spawn({ name: 'repair-kill-a', config });
      const tokenA = tokenOf(await a.waitForLog(ACQUIRED, { what: 'repair-kill-a to lead' }));
      const b = await procs.spawn({ name: 'repair-kill-b', config });
      await waitFor(
        async () =>
          ((await (await fetch(`${b.url}/readyz`)).json()) as { scheduler: { role: string } }).scheduler
            .role === 'standby',
        { what: 'repair-kill-b standby' },
      );

      // The holder decides requests (nothing ever arrives for these periods) and hangs delivering them.
      const hungKeys = await waitFor(
        async () => {
          const keys = new Set(hook.state.hits.map((h) => h.key));
          const rows = (await attemptRows()).filter((r) => keys.has(r.idempotency_key));
          return rows.length >= 2 ? rows : undefined;
        },
        { what: 'attempts committed and their deliveries hanging', timeout: 30_000 },
      );
      for (const row of hungKeys) {
        // Decided and committed by the holder, under its token; not recorded as delivered.
        expect(row).toMatchObject({ attempt: 1, lease_token: tokenA, deliveries: 0, delivered_at: null });
      }
      expect(a.logs(DELIVERED)).toEqual([]);

      a.signal('SIGKILL');
      expect(await a.waitForExit()).toEqual({ code: null, signal: 'SIGKILL' });
      const hungAtKill = new Set(hook.state.hits.map((h) => h.key));
      hook.state.hang = false;
      const tokenB = tokenOf(await b.waitForLog(ACQUIRED, { timeout: 10_000, what: 'the standby to lead' }));
      expect(tokenB).toBeGreaterThan(tokenA);

      // Every attempt the holder left undelivered is delivered by the standby, with the holder's token.
      await waitFor(
        async () => {
          const rows = await attemptRows();
          return [...hungAtKill].every((k) => rows.find((r) => r.idempotency_key === k)?.delivered_at);
        },
        { what: 'the hung attempts delivered by the standby' },
      );
      const byKey = new Map((await attemptRows()).map((r) => [r.idempotency_key, r]));
      for (const key of hungAtKill) {
        expect(byKey.get(key)).toMatchObject({ lease_token: tokenA, deliveries: 1 });
        expect(hook.state.hits.filter((h) => h.key === key).map((h) => h.answer)).toEqual(['hang', 200]);
      }

      // A producer fills one period the killed holder requested, for both assets: repaired by the standby.
      const [filled] = await db.sql<{ lo: number }[]>`
        select min(period_lo) / 1000 as lo from repair_requests
        where id = any(${[...hungAtKill].map((k) => Number(/^repair-(\d+)~a1$/.exec(k)![1]))}::int8[])`;
      const lo = Number(filled!.lo);
      await producer.addBulk(
        ['rk.a', 'rk.b'].map((asset) => ({
          name: 'e',
          data: { asset, start: iso(lo), end: iso(lo + PERIOD_MS), version: 'v1', id: `${asset}-${lo}` },
        })),
      );
      await waitFor(
        async () => {
          const rows = await db.sql<{ state: string }[]>`
            select state from repair_requests where rollup_id = 'rk' and period_lo = ${lo * 1000}`;
          return rows.length === 2 && rows.every((r) => r.state === 'repaired');
        },
        { what: 'the filled period repaired' },
      );
      expect(await b.stop()).toEqual({ code: 0, signal: null });

      // At the webhook: each key accepted exactly once, every hit of a key with the same body.
      const attempts = await attemptRows();
      const hits = hook.state.hits;
      const accepted: Record<string, number> = {};
      for (const h of hits) if (h.answer === 200) accepted[h.key] = (accepted[h.key] ?? 0) + 1;
      const delivered = attempts.filter((r) => r.delivered_at !== null).map((r) => r.idempotency_key);
      expect(Object.keys(accepted).sort()).toEqual([...delivered].sort());
      expect(Object.values(accepted).every((n) => n === 1)).toBe(true);
      for (const h of hits) {
        expect(h.body).toEqual(attempts.find((r) => r.idempotency_key === h.key)!.payload);
        expect(h.body.idempotency_key).toBe(h.key);
      }
      // Logged as delivered once per key, by the standby only.
      expect(countByKey([a, b], DELIVERED)).toEqual(Object.fromEntries(delivered.map((k) => [k, 1])));
      // One request per (asset, range): no two requests of an asset overlap, each with one attempt.
      const [overlaps] = await db.sql<{ n: number }[]>`
        select count(*)::int as n from repair_requests x join repair_requests y
          on x.asset = y.asset and x.id < y.id and x.span && y.span`;
      expect(overlaps!.n).toBe(0);
      expect(attempts.every((r) => r.attempt === 1)).toBe(true);
      const requests = await db.sql<{ n: number }[]>`select count(*)::int as n from repair_requests`;
      expect(requests[0]!.n).toBe(attempts.length);
      console.warn(
        `[repairs-failover] ${hungAtKill.size} deliveries hung at the kill, ${delivered.length} attempts delivered once each, ${hits.length} webhook hits`,
      );
    } finally {
      await hook.close();
    }
  });
});
