/**
 * Stale connections (SPEC §13): the daemon's existing PostgreSQL flows stop answering (bytes
 * neither delivered nor refused) while new connections work, as when a NAT loses its flows. The
 * cut-off guard's probe answers, so nothing pauses; instead each pooled connection that owes an
 * answer past half of queue.pg_stall_timeout, with its backend idle, is given up and its work
 * retried on a fresh one. Every event sent during the window is indexed within pg_stall_timeout
 * + 2 s, coverage answers read on fresh connections, and nothing is lost or doubled after.
 *
 * npm run test:stale-flows. Not in npm test: it does not pass yet. Ingest recovers within the
 * bound (seen in four runs), but the scheduler stops marking and triggering once its lease
 * connection and LISTEN connection are stranded, and a later read hangs; see docs/reliability.md.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { BlackholeProxy } from '../helpers/blackhole-proxy.js';
import { startTestDaemon, testConfig, testProducer } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const STALL_MS = 2000;
const MINUTE = 60_000;
const db = await createTestDatabase();
const prefix = createTestPrefix();
const target = new URL(db.url);
const proxy = await BlackholeProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
afterAll(async () => {
  proxy.heal();
  await proxy.close();
});
const H = Date.UTC(2026, 5, 1, 10);
const config = testConfig(db, prefix, {
  database_url: proxy.proxiedUrl(db.url),
  queue: { prefix, batch_wait: 'PT0.002S', pg_stall_timeout: `PT${STALL_MS / 1000}S` },
  rollups: [
    {
      id: 'stale',
      upstream: ['stale.a'],
      every: 'hour',
      begin: '2026-06-01',
      target: { type: 'queue', queue: 'stale-runs' },
    },
  ],
});
const daemon = await startTestDaemon(config);
const producer = testProducer(config);
const iso = (ms: number) => new Date(ms).toISOString();
const event = (i: number) => ({
  asset: 'stale.a',
  start: iso(H + i * MINUTE),
  end: iso(H + (i + 1) * MINUTE),
  id: `e${i}`,
});
const indexed = async (id: string) =>
  (await db.sql`select 1 from events where event_id = ${id}`).length === 1;

describe('stale PostgreSQL flows', () => {
  it('gives up the stale connections: events indexed and answers read on fresh ones within the bound', {
    timeout: 120_000,
  }, async () => {
    // Warm: every pool has connections open (ingest, scheduler, lease), which the cut will strand.
    await producer.addBulk(Array.from({ length: 30 }, (_, i) => ({ name: 'event', data: event(i) })));
    await waitFor(() => indexed('e29'), { what: 'the first half indexed' });
    await daemon.http.inject({
      url: '/v1/rollups/stale/periods?start=2026-06-01T10:00:00Z&end=2026-06-01T11:00:00Z',
    });

    const stranded = proxy.staleExisting();
    expect(stranded).toBeGreaterThan(0);
    const latencies: number[] = [];
    for (let i = 30; i < 60; i += 5) {
      const sentAt = Date.now();
      await producer.addBulk(Array.from({ length: 5 }, (_, k) => ({ name: 'event', data: event(i + k) })));
      await waitFor(() => indexed(`e${i + 4}`), { what: `events up to e${i + 4} indexed`, timeout: 15_000 });
      latencies.push(Date.now() - sentAt);
    }
    expect(Math.max(...latencies), JSON.stringify(latencies)).toBeLessThanOrEqual(STALL_MS + 2000);
    // HTTP reads answer on fresh connections too.
    const listing = await daemon.http.inject({
      url: '/v1/assets/stale.a/coverage?start=2026-06-01T10:00:00Z&end=2026-06-01T11:00:00Z',
    });
    expect(listing.statusCode, listing.body).toBe(200);
    expect(listing.json().ratio).toBe(1);

    proxy.heal();
    // The hour is complete: decided once (the scheduler's recovery during the window is not
    // asserted yet: see docs/reliability.md).
    await waitFor(
      async () =>
        (await db.sql`select 1 from triggers where rollup_id = 'stale' and period_lo = ${H * 1000}`)
          .length === 1,
      { what: 'the hour triggered', timeout: 30_000 },
    );
    const [after] = await db.sql<[{ events: number; distinct: number; triggers: number }]>`
      select (select count(*)::int from events) as events, (select count(distinct event_id)::int from events) as distinct,
        (select count(*)::int from triggers where rollup_id = 'stale') as triggers`;
    expect(after).toEqual({ events: 60, distinct: 60, triggers: 1 });
  });
});
