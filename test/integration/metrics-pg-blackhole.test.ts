/**
 * /metrics while PostgreSQL does not answer (packets dropped, nothing reset): the gauges computed
 * from PostgreSQL at scrape time (periods, freshness) keep their last values and the scrape
 * answers within its bound instead of hanging with the connection.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { BlackholeProxy } from '../helpers/blackhole-proxy.js';
import { startTestDaemon, testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';

const db = await createTestDatabase();
const prefix = createTestPrefix();
const target = new URL(db.url);
const proxy = await BlackholeProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
afterAll(() => {
  proxy.heal();
  proxy.close();
});
const config = testConfig(db, prefix, {
  database_url: proxy.proxiedUrl(db.url),
  rollups: [
    {
      id: 'bh',
      upstream: ['bh.a'],
      every: 'hour',
      begin: '2026-01-01',
      target: { type: 'queue', queue: 'bh-runs' },
    },
  ],
});
const daemon = await startTestDaemon(config);
const periodsLine = (body: string) =>
  /^coverage_rollup_periods\{rollup="bh",state="waiting"\} (\d+)$/m.exec(body)?.[1];

describe('/metrics with PostgreSQL blackholed', () => {
  it('answers within a few seconds with the last period counts', async () => {
    const before = await daemon.http.inject({ url: '/metrics' });
    expect(Number(periodsLine(before.body))).toBeGreaterThan(0);
    proxy.blackhole();
    const started = Date.now();
    const during = await daemon.http.inject({ url: '/metrics' });
    const elapsed = Date.now() - started;
    expect(during.statusCode).toBe(200);
    // Each PostgreSQL-backed refresh waits at most 2 s; without the bound this scrape hangs as long
    // as the blackhole lasts (the test's hook timeout would end it).
    expect(elapsed).toBeLessThan(10_000);
    expect(periodsLine(during.body)).toBe(periodsLine(before.body));
    proxy.heal();
  });
});
