/**
 * Webhook runs and `run.outcome`, against a real daemon and a real HTTP receiver. By default a
 * webhook run succeeds when the endpoint answers 2xx: delivered once, nothing happens at
 * run.timeout, its output is covered. With `run.outcome: callback` it waits for POST /v1/runs and,
 * with none, times out and is retried under new keys. A refused delivery (4xx) fails and is
 * retried under a new key, a 5xx is delivered again under the same one. A report after a success
 * on delivery is recorded and changes nothing. Runs left started by a rollup that waited for
 * callbacks succeed when the next daemon runs it with the default (an upgrade).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { startDaemon } from '../../src/daemon/daemon.js';
import { createLogger } from '../../src/support/log.js';
import { startTestDaemon, TEST_TOKEN, testConfig, testProducer } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';

// biome-ignore lint/suspicious/noExplicitAny: answers are read as untyped JSON
type Json = Record<string, any>;

const DAY = '2026-11-02';
const hourOf = (h: number) => `${DAY}T${String(h).padStart(2, '0')}`;
const span = (h: number) => ({ start: `${hourOf(h)}:00:00Z`, end: `${hourOf(h + 1)}:00:00Z` });
const keyOf = (rollup: string, h: number) =>
  `${rollup}@${DAY.replaceAll('-', '')}T${String(h).padStart(2, '0')}0000Z#1`;

// /hook/refused refuses attempt 1 (its key has no ~a) with a 400; /hook/flaky answers its first
// POST 503; everything else is accepted.
let flakyCalls = 0;
const sink = await startWebhookSink((path, key) => {
  if (path === '/hook/refused') return key?.includes('~a') ? 200 : 400;
  if (path === '/hook/flaky') return flakyCalls++ === 0 ? 503 : 200;
  return 200;
});
afterAll(() => sink.close());
const callsTo = (path: string) => sink.calls.filter((c) => c.path === path);

// One policy for every rollup: a one-second timeout, so a run waiting for an outcome times out
// (and is retried) within the test.
const fast = { retries: 2, backoff: 'PT0.2S', timeout: 'PT1S' };
const hook = (id: string, extra: Record<string, unknown> = {}) => ({
  id,
  upstream: [`w.${id}`],
  every: 'hour',
  begin: DAY,
  run: fast,
  target: { type: 'webhook', url: `${sink.url}/${id}` },
  ...extra,
});

const db = await createTestDatabase();
const prefix = createTestPrefix();
const config = testConfig(db, prefix, {
  rollups: [
    hook('delivery', { output: 'w.delivery_out' }),
    hook('callback', { run: { ...fast, outcome: 'callback' } }),
    hook('refused'),
    hook('flaky'),
  ],
});
const daemon = await startTestDaemon(config);
const producer = testProducer(config);
const cover = (id: string, h: number) => producer.add('e', { asset: `w.${id}`, ...span(h), version: 'v1' });

const period = async (id: string, h: number): Promise<Json> =>
  (await daemon.http.inject({ url: `/v1/rollups/${id}/periods/${hourOf(h)}` })).json();
const untilRun = (id: string, h: number, ok: (run: Json) => boolean, what: string) =>
  waitFor(
    async () => {
      const answer = await period(id, h);
      return answer.period?.run && ok(answer.period.run) ? answer : undefined;
    },
    { what, timeout: 30_000 },
  );
const history = (detail: Json) =>
  detail.runs.map((r: Json) => [
    r.attempt,
    r.state,
    r.reports.map((x: Json) => [x.source, x.state, x.effect]),
  ]);
const report = (body: Record<string, unknown>) =>
  daemon.http.inject({
    method: 'POST',
    url: '/v1/runs',
    headers: { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });

describe('webhook runs by run.outcome', () => {
  it('by default a 2xx is the success: delivered once, nothing at run.timeout, its output covered; with callback the run times out and is retried under new keys', async () => {
    await cover('delivery', 10);
    await cover('callback', 10);
    // The callback rollup, same policy, delivered at the same time: once its third attempt has
    // timed out for good, the default rollup's run has been past its own timeout for long.
    const waited = await untilRun(
      'callback',
      10,
      (r) => r.attempt === 3 && r.state === 'timed_out' && r.next_retry_at === null,
      'the callback run timed out three times',
    );
    const callbackKey = keyOf('callback', 10);
    expect(callsTo('/hook/callback').map((c) => c.key)).toEqual([
      callbackKey,
      `${callbackKey}~a2`,
      `${callbackKey}~a3`,
    ]);
    expect(history(waited).map(([attempt, state]: [number, string]) => [attempt, state])).toEqual([
      [3, 'timed_out'],
      [2, 'timed_out'],
      [1, 'timed_out'],
    ]);

    const key = keyOf('delivery', 10);
    const delivered = callsTo('/hook/delivery');
    expect(delivered.map((c) => c.key)).toEqual([key]);
    expect(delivered[0]!.body).toMatchObject({ attempt: 1, run_id: key, idempotency_key: key });
    expect(Date.now() - delivered[0]!.at).toBeGreaterThan(1000 + 200); // run.timeout and a backoff
    const detail = await period('delivery', 10);
    expect(detail.period.run).toMatchObject({
      attempt: 1,
      state: 'succeeded',
      error: null,
      next_retry_at: null,
    });
    expect(detail.period.run.finished_at).not.toBeNull();
    expect(history(detail)).toEqual([[1, 'succeeded', [['scheduler', 'succeeded', 'applied']]]]);
    // A success like any other: the output is covered over the period, at the generation's version.
    const { start, end } = span(10);
    const coverage = await daemon.http.inject({
      url: `/v1/assets/w.delivery_out/coverage?start=${start}&end=${end}`,
    });
    expect(coverage.json()).toMatchObject({ covered: true, batches: [{ version: 'delivery#1' }] });
    const rollups = (await daemon.http.inject({ url: '/v1/rollups' })).json();
    const run = (id: string) => rollups.rollups.find((r: Json) => r.id === id).run;
    expect(run('delivery')).toMatchObject({ outcome: 'delivery', timeout: 'PT1S' });
    expect(run('callback')).toMatchObject({ outcome: 'callback' });
  });

  it('a 4xx fails the attempt and it is retried under a new key; a 5xx is delivered again under the same key', async () => {
    await cover('refused', 10);
    await cover('flaky', 10);
    const refused = await untilRun(
      'refused',
      10,
      (r) => r.attempt === 2 && r.state === 'succeeded',
      'attempt 2 succeeded',
    );
    const key = keyOf('refused', 10);
    expect(callsTo('/hook/refused').map((c) => [c.key, c.status])).toEqual([
      [key, 400],
      [`${key}~a2`, 200],
    ]);
    expect(history(refused)).toEqual([
      [
        2,
        'succeeded',
        [
          ['scheduler', 'pending', 'applied'], // the retry made
          ['scheduler', 'succeeded', 'applied'],
        ],
      ],
      [1, 'failed', [['scheduler', 'failed', 'applied']]],
    ]);

    const flaky = await untilRun('flaky', 10, (r) => r.state === 'succeeded', 'succeeded after a 503');
    const flakyKey = keyOf('flaky', 10);
    expect(callsTo('/hook/flaky').map((c) => [c.key, c.status])).toEqual([
      [flakyKey, 503],
      [flakyKey, 200],
    ]);
    expect(flaky.period.run).toMatchObject({ attempt: 1, state: 'succeeded' });
    expect(flaky.runs[0].deliveries).toBe(2);
  });

  it('a report after a success on delivery is recorded and changes nothing: the success stands, no retry', async () => {
    await cover('delivery', 11);
    await untilRun('delivery', 11, (r) => r.state === 'succeeded', 'succeeded on delivery');
    const key = keyOf('delivery', 11);
    const failed = await report({ idempotency_key: key, attempt: 1, state: 'failed', error: 'job crashed' });
    expect(failed.statusCode).toBe(200);
    expect(failed.json()).toMatchObject({
      effect: 'refused',
      current: true,
      run: { state: 'succeeded', error: null, next_retry_at: null },
    });
    const again = await report({ idempotency_key: key, attempt: 1, state: 'succeeded', version: 'v2' });
    expect(again.json()).toMatchObject({ effect: 'unchanged', run: { state: 'succeeded' } });
    const detail = await period('delivery', 11);
    expect(history(detail)).toEqual([
      [
        1,
        'succeeded',
        [
          ['scheduler', 'succeeded', 'applied'],
          ['callback', 'failed', 'refused'],
          ['callback', 'succeeded', 'unchanged'],
        ],
      ],
    ]);
    expect(detail.runs[0]).toMatchObject({ version: null, next_retry_at: null });
    expect(callsTo('/hook/delivery').filter((c) => c.key?.startsWith(key))).toHaveLength(1);
  });
});

describe('a deployment upgrading to run.outcome', () => {
  it('succeeds the runs a webhook rollup left started waiting for a callback, without delivering them again', async () => {
    const upgradeDb = await createTestDatabase();
    const upgradePrefix = createTestPrefix();
    const rollup = (run: Record<string, unknown>) => ({
      id: 'upgraded',
      upstream: ['w.upgraded'],
      every: 'hour',
      begin: DAY,
      run,
      output: 'w.upgraded_out',
      target: { type: 'webhook', url: `${sink.url}/upgraded` },
    });
    // Before: the run waits for a callback (as every webhook run did), with a long timeout.
    const before = testConfig(upgradeDb, upgradePrefix, {
      rollups: [rollup({ timeout: 'PT1H', outcome: 'callback' })],
    });
    const first = await startDaemon(before, createLogger(before.log_level));
    try {
      await testProducer(before).add('e', { asset: 'w.upgraded', ...span(10), version: 'v1' });
      await waitFor(
        async () =>
          (await first.http.inject({ url: `/v1/rollups/upgraded/periods/${hourOf(10)}` })).json().period?.run
            ?.state === 'started',
        { what: 'the run started, waiting for its callback', timeout: 30_000 },
      );
    } finally {
      await first.stop();
    }
    // After: the same rollup with the default outcome.
    const after = testConfig(upgradeDb, upgradePrefix, { rollups: [rollup({ timeout: 'PT1H' })] });
    const second = await startDaemon(after, createLogger(after.log_level));
    try {
      const detail = await waitFor(
        async () => {
          const answer = (
            await second.http.inject({ url: `/v1/rollups/upgraded/periods/${hourOf(10)}` })
          ).json();
          return answer.period?.run?.state === 'succeeded' ? answer : undefined;
        },
        { what: 'the started run succeeded', timeout: 30_000 },
      );
      expect(history(detail)).toEqual([
        [
          1,
          'succeeded',
          [
            ['scheduler', 'started', 'applied'],
            ['scheduler', 'succeeded', 'applied'],
          ],
        ],
      ]);
      expect(callsTo('/hook/upgraded').map((c) => c.key)).toEqual([keyOf('upgraded', 10)]);
      const { start, end } = span(10);
      const coverage = await second.http.inject({
        url: `/v1/assets/w.upgraded_out/coverage?start=${start}&end=${end}`,
      });
      expect(coverage.json()).toMatchObject({ covered: true });
    } finally {
      await second.stop();
    }
  });
});
