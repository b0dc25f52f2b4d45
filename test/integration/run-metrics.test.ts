/**
 * The run metrics against a real daemon: open runs counted at scrape time by target type and
 * state, and a run's end counted once, by target type and state, with no rollup label.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { startTestDaemon, testConfig, testProducer } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

// A webhook endpoint that accepts /ok (the run starts and waits for its callback: run.outcome
// callback) and refuses /bad with a 400 (the attempt fails at delivery).
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(req.url === '/ok' ? 202 : 400).end());
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const db = await createTestDatabase();
const prefix = createTestPrefix();
const hourly = (id: string, url: string) => ({
  id,
  upstream: [`rm.${id}`],
  every: 'hour',
  timezone: 'UTC',
  begin: '2026-11-02',
  run: { retries: 0, backoff: 'PT1M', timeout: 'PT6H', outcome: 'callback' },
  target: { type: 'webhook', url },
});
const config = testConfig(db, prefix, {
  rollups: [hourly('rm_ok', `${base}/ok`), hourly('rm_bad', `${base}/bad`)],
});
const daemon = await startTestDaemon(config);
const producer = testProducer(config);

const metric = async (line: string) => {
  const body = (await daemon.http.inject({ url: '/metrics' })).body;
  const found = body.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? undefined : Number(found.split(' ').at(-1));
};

describe('run metrics', () => {
  it('count open runs when scraped and a refused delivery as a failed run given up on', async () => {
    expect(await metric('coverage_rollup_runs_open{target="webhook",state="started"}')).toBe(0);
    expect(await metric('coverage_rollup_runs_total{target="webhook",state="failed"}')).toBe(0);
    await producer.addBulk(
      ['rm_ok', 'rm_bad'].map((id) => ({
        name: 'e',
        data: { asset: `rm.${id}`, start: '2026-11-02T10:00:00Z', end: '2026-11-02T11:00:00Z' },
      })),
    );
    await waitFor(
      async () => (await metric('coverage_rollup_runs_open{target="webhook",state="started"}')) === 1,
      { what: 'one open webhook run' },
    );
    await waitFor(
      async () => (await metric('coverage_rollup_runs_total{target="webhook",state="failed"}')) === 1,
      { what: 'one failed webhook run' },
    );
    expect(await metric('coverage_rollup_runs_given_up_total{target="webhook",state="failed"}')).toBe(1);
    // Refused at delivery, it never started: not timed.
    expect(await metric('coverage_rollup_run_duration_seconds_count{target="webhook",state="failed"}')).toBe(
      0,
    );
    expect(await metric('coverage_rollup_runs_total{target="webhook",state="succeeded"}')).toBe(0);
    const body = (await daemon.http.inject({ url: '/metrics' })).body;
    expect(
      body.split('\n').filter((l) => l.startsWith('coverage_rollup_run') && l.includes('rollup=')),
    ).toEqual([]);
  });
});
