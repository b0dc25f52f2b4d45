import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { startDaemon } from '../../src/daemon/daemon.js';
import { createLogger } from '../../src/support/log.js';
import { startTestDaemon, testConfig, testProducer } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

// A decision committed by one process and delivered by the next: the outbox row survives the
// process, the next lease holder delivers it with the same key and decides nothing again.
interface Received {
  key: string | undefined;
  body: Record<string, unknown>;
  status: number;
}
const received: Received[] = [];
let answer = 503;
const server = createServer((req, res) => {
  let text = '';
  req.setEncoding('utf8');
  req.on('data', (chunk: string) => {
    text += chunk;
  });
  req.on('end', () => {
    const status = answer;
    received.push({
      key: req.headers['idempotency-key'] as string | undefined,
      body: JSON.parse(text),
      status,
    });
    res.writeHead(status).end();
  });
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const db = await createTestDatabase();
const prefix = createTestPrefix();
const config = testConfig(db, prefix, {
  rollups: [
    {
      id: 'restart_hook',
      upstream: ['r.asset'],
      every: 'hour',
      timezone: 'UTC',
      begin: '2026-11-02',
      target: { type: 'webhook', url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook` },
    },
  ],
});
const producer = testProducer(config);

interface TriggerRow {
  period_lo: number;
  generation: number;
  idempotency_key: string;
  lease_token: number;
  decided_at: Date;
  attempts: number;
  last_error: string | null;
  delivered_at: Date | null;
  payload: Record<string, unknown>;
}
const allTriggers = () =>
  db.sql<TriggerRow[]>`
    select period_lo, generation, idempotency_key, lease_token, decided_at, attempts, last_error, delivered_at, payload
    from triggers where rollup_id = 'restart_hook' order by period_lo, generation`;

describe('delivery after a restart', () => {
  it('a decision left undelivered by a stopped process is delivered by the next one, same key, no second decision', async () => {
    const first = await startDaemon(config, createLogger(config.log_level));
    let firstStopped = false;
    const stopFirst = async () => {
      if (firstStopped) return;
      firstStopped = true;
      await first.stop();
    };
    onTestFinished(stopFirst);
    await producer.add('e', {
      asset: 'r.asset',
      start: '2026-11-02T10:00:00Z',
      end: '2026-11-02T11:00:00Z',
      version: 'v1',
    });
    // The first process decides, and its delivery fails with a 503.
    const [undelivered] = await waitFor(
      async () => {
        const rows = await allTriggers();
        return rows.length === 1 && rows[0]!.attempts >= 1 ? rows : undefined;
      },
      { what: 'a failed first delivery' },
    );
    expect(undelivered).toMatchObject({
      generation: 1,
      idempotency_key: 'restart_hook@20261102T100000Z#1',
      delivered_at: null,
    });
    expect(undelivered!.last_error).toMatch(/^HTTP 503/);
    await stopFirst();
    const refused = received.length;
    expect(refused).toBeGreaterThanOrEqual(1);
    expect(received.every((r) => r.status === 503)).toBe(true);

    // The receiver recovers; a new process on the same database takes the lease and delivers.
    answer = 200;
    await startTestDaemon(config);
    const rows = await waitFor(
      async () => {
        const all = await allTriggers();
        return all[0]?.delivered_at ? all : undefined;
      },
      { what: 'delivery by the second process' },
    );
    expect(rows).toHaveLength(1);
    const [delivered] = rows;
    // The same decision: same key, same decided_at, fenced by the first process's lease token.
    expect(delivered).toMatchObject({
      generation: 1,
      idempotency_key: undelivered!.idempotency_key,
      lease_token: undelivered!.lease_token,
      decided_at: undelivered!.decided_at,
      last_error: null,
    });
    expect(delivered!.payload).toEqual(undelivered!.payload);
    const [lease] = await db.sql<{ token: number }[]>`select max(token)::int8 as token from scheduler_leases`;
    expect(lease!.token).toBeGreaterThan(undelivered!.lease_token);

    expect(received.slice(refused).map((r) => r.status)).toEqual([200]);
    const keys = new Set(received.map((r) => r.key));
    expect([...keys]).toEqual(['restart_hook@20261102T100000Z#1']);
    for (const r of received) expect(r.body).toEqual(undelivered!.payload);

    const [period] = await db.sql`
      select state, generation from periods where rollup_id = 'restart_hook' and lo = ${Date.parse('2026-11-02T10:00:00Z') * 1000}`;
    expect(period).toEqual({ state: 'triggered', generation: 1 });
  });
});
