/**
 * The waiting coverage call, `GET /v1/assets/{asset}/coverage?...&wait=PT30S`, against whole
 * daemons: answered as soon as the commit that covers the window lands (well before its wait),
 * also on an HTTP-only instance that neither ingests nor schedules, and for an asset not seen when
 * the wait began; at its end with what is missing; refused over http.max_waiters with a 503 and
 * Retry-After; validated; and answered, not dropped, when the daemon stops. Run again on the
 * PostgreSQL queue backend by pg-queue/coverage-wait.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon } from '../../src/daemon/daemon.js';
import { createLogger } from '../../src/support/log.js';
import { startTestDaemon, TEST_TOKEN, testConfig } from '../helpers/daemon.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

type Daemon = Awaited<ReturnType<typeof startDaemon>>;
type Json = Record<string, unknown>;

const T = (m: number) => new Date(Date.UTC(2025, 5, 1, 10, m)).toISOString().replace('.000Z', 'Z');

let db: TestDatabase;
let ingesting: Daemon;
/** Neither ingests (queue.consume: []) nor schedules: it hears commits only through PostgreSQL. */
let httpOnly: Daemon;
const prefix = createTestPrefix();

beforeAll(async () => {
  db = await createTestDatabase();
  ingesting = await startTestDaemon(
    testConfig(db, prefix, { http: { host: '127.0.0.1', port: 0, max_waiters: 3 } }),
  );
  httpOnly = await startTestDaemon(
    testConfig(db, prefix, {
      http: { host: '127.0.0.1', port: 0, max_waiters: 3 },
      queue: { prefix, batch_wait: 'PT0.002S', consume: [] },
      scheduler: { enabled: false },
    }),
  );
});

async function announce(daemon: Daemon, asset: string, start: string, end: string): Promise<void> {
  const response = await fetch(`${daemon.url}/v1/events`, {
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ asset, start, end, id: `${asset}@${start}` }),
  });
  expect(response.status, await response.clone().text()).toBeLessThan(300);
}

interface Answer {
  status: number;
  body: Json;
  headers: Headers;
  /** When the answer arrived (epoch ms). */
  at: number;
}

async function coverage(daemon: Daemon, asset: string, query: Record<string, string>): Promise<Answer> {
  const url = `${daemon.url}/v1/assets/${encodeURIComponent(asset)}/coverage?${new URLSearchParams(query)}`;
  const response = await fetch(url);
  return {
    status: response.status,
    body: (await response.json()) as Json,
    headers: response.headers,
    at: Date.now(),
  };
}

async function waiters(daemon: Daemon): Promise<number> {
  return (await daemon.metrics.coverageWaiters.get()).values[0]?.value ?? 0;
}

/** Resolves once coverage of [start, end) of `asset` reads `covered`, polled without waiting. */
async function indexed(daemon: Daemon, asset: string, start: string, end: string, ratio: number) {
  await waitFor(async () => (await coverage(daemon, asset, { start, end })).body.ratio === ratio, {
    timeout: 20_000,
    what: `${asset} [${start}, ${end}) at ratio ${ratio}`,
  });
}

describe('GET /v1/assets/{asset}/coverage?wait=', () => {
  it.each([
    ['the ingesting instance', () => ingesting],
    ['an HTTP-only instance', () => httpOnly],
  ])('on %s, answers as soon as the covering commit lands, not at the end of its wait', async (_, on) => {
    const daemon = on();
    const asset = `wait.cover.${daemon === httpOnly ? 'http' : 'ingest'}`;
    await announce(ingesting, asset, T(0), T(20));
    await indexed(daemon, asset, T(0), T(60), 1 / 3);

    const asked = Date.now();
    const pending = coverage(daemon, asset, { start: T(0), end: T(60), wait: 'PT30S' });
    await waitFor(async () => (await waiters(daemon)) === 1, { what: 'the request to wait' });
    // A commit of the asset that leaves a hole: the request checks again and keeps waiting.
    await announce(ingesting, asset, T(20), T(40));
    await indexed(daemon, asset, T(0), T(60), 2 / 3);
    expect(await waiters(daemon)).toBe(1);

    const covering = Date.now();
    await announce(ingesting, asset, T(40), T(60));
    const answer = await pending;
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ covered: true, ratio: 1, missing: [], missing_count: 0 });
    // Woken by the commit: far sooner than the 30 s it could have waited (a loaded machine's bound).
    expect(answer.at - covering).toBeLessThan(15_000);
    expect(answer.at - asked).toBeLessThan(29_000);
    expect(await waiters(daemon)).toBe(0);
  });

  it('answers at once when the window is already covered', async () => {
    await announce(ingesting, 'wait.done', T(0), T(60));
    await indexed(ingesting, 'wait.done', T(0), T(60), 1);
    const asked = Date.now();
    const answer = await coverage(ingesting, 'wait.done', { start: T(0), end: T(60), wait: 'PT30S' });
    expect(answer.body).toMatchObject({ covered: true });
    expect(answer.at - asked).toBeLessThan(15_000);
  });

  it('waits for an asset not seen yet, woken by its first commit', async () => {
    const pending = coverage(httpOnly, 'wait.new', { start: T(0), end: T(10), wait: 'PT30S' });
    await waitFor(async () => (await waiters(httpOnly)) === 1, { what: 'the request to wait' });
    const covering = Date.now();
    await announce(ingesting, 'wait.new', T(0), T(10));
    const answer = await pending;
    expect(answer.body).toMatchObject({ asset: 'wait.new', covered: true });
    expect(answer.at - covering).toBeLessThan(15_000);
  });

  it('at the end of its wait, answers with what is still missing', async () => {
    await announce(ingesting, 'wait.hole', T(0), T(30));
    await indexed(ingesting, 'wait.hole', T(0), T(60), 0.5);
    const asked = Date.now();
    const answer = await coverage(ingesting, 'wait.hole', { start: T(0), end: T(60), wait: 'PT1.5S' });
    expect(answer.at - asked).toBeGreaterThanOrEqual(1400);
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({
      covered: false,
      ratio: 0.5,
      missing: [{ start: T(30), end: T(60) }],
      missing_count: 1,
    });
    // Still unknown at the end: the 404 of a request without wait.
    const unknown = await coverage(ingesting, 'wait.never', { start: T(0), end: T(1), wait: 'PT0.5S' });
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe('unknown_asset');
  });

  it('holds at most http.max_waiters requests; one more is refused with 503 and Retry-After', async () => {
    const held = [0, 1, 2].map((i) =>
      coverage(ingesting, `wait.bound.${i}`, { start: T(0), end: T(1), wait: 'PT20S' }),
    );
    await waitFor(async () => (await waiters(ingesting)) === 3, { what: 'three requests waiting' });
    const refused = await coverage(ingesting, 'wait.bound.3', { start: T(0), end: T(1), wait: 'PT20S' });
    expect(refused.status).toBe(503);
    expect(refused.body.code).toBe('too_many_waiters');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    // Without wait, the same request is answered as ever.
    const plain = await coverage(ingesting, 'wait.bound.3', { start: T(0), end: T(1) });
    expect(plain.body.code).toBe('unknown_asset');
    for (let i = 0; i < 3; i++) await announce(ingesting, `wait.bound.${i}`, T(0), T(1));
    for (const answer of await Promise.all(held)) expect(answer.body).toMatchObject({ covered: true });
    expect(await waiters(ingesting)).toBe(0);
    const metrics = await fetch(`${ingesting.url}/metrics`).then((r) => r.text());
    expect(metrics).toMatch(/^coverage_rollup_coverage_waits_total\{outcome="refused"\} 1$/m);
  });

  it.each([
    ['5M', 'not an ISO 8601 duration'],
    ['P1M', 'not an ISO 8601 duration'],
    ['PT', 'not an ISO 8601 duration'],
    ['PT2H', 'longer than the most this daemon holds a request (900 s)'],
  ])('refuses wait=%s', async (wait, message) => {
    await announce(ingesting, 'wait.valid', T(0), T(1));
    await indexed(ingesting, 'wait.valid', T(0), T(1), 1);
    const answer = await coverage(ingesting, 'wait.valid', { start: T(0), end: T(1), wait });
    expect(answer.status).toBe(400);
    expect(answer.body.code).toBe('invalid_wait');
    if (wait === 'PT2H') expect(answer.body.message).toContain(message);
  });

  it('a client that leaves gives its place back', async () => {
    const gone = new AbortController();
    const url = `${ingesting.url}/v1/assets/wait.left/coverage?start=${T(0)}&end=${T(1)}&wait=PT30S`;
    const request = fetch(url, { signal: gone.signal }).catch(() => 'aborted');
    await waitFor(async () => (await waiters(ingesting)) === 1, { what: 'the request to wait' });
    gone.abort();
    expect(await request).toBe('aborted');
    await waitFor(async () => (await waiters(ingesting)) === 0, { what: 'the waiter to be released' });
  });
});

describe('a daemon stopping', () => {
  let daemon: Daemon | undefined;
  afterAll(() => daemon?.stop());

  it('answers its waiting requests with what they have instead of holding the stop', async () => {
    const config = testConfig(db, createTestPrefix());
    const started = await startDaemon(config, createLogger(config.log_level));
    daemon = started;
    await announce(started, 'wait.stop', T(0), T(30));
    await indexed(started, 'wait.stop', T(0), T(60), 0.5);
    const pending = coverage(started, 'wait.stop', { start: T(0), end: T(60), wait: 'PT60S' });
    await waitFor(async () => (await waiters(started)) === 1, { what: 'the request to wait' });
    const stopping = Date.now();
    daemon = undefined;
    await started.stop();
    const answer = await pending;
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ covered: false, ratio: 0.5 });
    expect(answer.at - stopping).toBeLessThan(30_000);
  });
});
