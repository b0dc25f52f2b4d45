/**
 * Real answers of every operation, success and error, validated against the served
 * `/openapi.json`: a daemon with rollups and read tokens, so every
 * /v1 route has an answer to check and an error to provoke.
 */
import type { LightMyRequestResponse } from 'fastify';
import { describe, expect, it } from 'vitest';
import { startTestDaemon, TEST_TOKEN, testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { answerChecker, unresolvedRefs } from '../helpers/openapi.js';
import { type ClientCall, callsOfEveryOperation, typeCheckCalls } from '../helpers/openapi-client.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

// biome-ignore lint/suspicious/noExplicitAny: the document is read as untyped JSON
type Json = Record<string, any>;

const READ_TOKEN = 'read-token-0123456789abcdef';
const DAY_MS = 86_400_000;
// Yesterday's first hour: a whole period in the past, so covering it triggers it.
const day = new Date(Date.now() - DAY_MS).toISOString().slice(0, 10);
const hour = { start: `${day}T00:00:00Z`, end: `${day}T01:00:00Z` };

const db = await createTestDatabase();
const prefix = createTestPrefix();
const daemon = await startTestDaemon(
  testConfig(db, prefix, {
    read_tokens: [READ_TOKEN],
    rollups: [
      {
        id: 'api_hourly',
        upstream: ['api.orders'],
        every: 'hour',
        begin: day,
        target: { type: 'queue', queue: 'api-runs' },
        // Yesterday's empty hours owe repair requests: GET /v1/repairs has some to answer.
        repair: { after: 'PT1S', target: { type: 'queue', queue: 'api-repairs' } },
      },
    ],
  }),
);

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const reader = bearer(READ_TOKEN);
const writer = bearer(TEST_TOKEN);

const documentResponse = await daemon.http.inject({ url: '/openapi.json' });
const document = documentResponse.json() as Json;
const check = answerChecker(document);
/** Statuses seen per operation, to show every operation was exercised. */
const seen = new Map<string, Set<number>>();
/** One real JSON answer per operation and status, for the generated client's types. */
const realAnswers = new Map<string, { path: string; method: string; status: number; body: unknown }>();

interface Call {
  readonly method?: 'GET' | 'POST';
  /** The path as the document writes it. */
  readonly path: string;
  readonly url: string;
  readonly headers?: Record<string, string>;
  readonly body?: unknown;
  readonly payload?: string | Buffer;
  readonly status: number;
}

/** Makes the call, expects its status and validates its body against the document. */
async function answer({ method = 'GET', path, url, headers, body, payload, status }: Call) {
  const response: LightMyRequestResponse = await daemon.http.inject({
    method,
    url,
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    ...(payload === undefined ? {} : { payload }),
  });
  expect(response.statusCode, `${method} ${url}: ${response.body}`).toBe(status);
  const mediaType = String(response.headers['content-type']).split(';')[0]!;
  const parsed = mediaType === 'application/json' ? response.json() : response.body;
  expect(check(method, path, status, parsed, mediaType), `${method} ${url}`).toEqual({ errors: null });
  const key = `${method} ${path}`;
  seen.set(key, (seen.get(key) ?? new Set()).add(status));
  if (mediaType === 'application/json' && !realAnswers.has(`${key} ${status}`))
    realAnswers.set(`${key} ${status}`, { path, method: method.toLowerCase(), status, body: parsed });
  return parsed;
}

/** A read's body, unchecked: for waiting on a condition. */
const json = async (url: string) => (await daemon.http.inject({ url, headers: reader })).json() as Json;

describe('/openapi.json', () => {
  it('is an OpenAPI 3.1 document whose references all resolve', async () => {
    expect(documentResponse.statusCode).toBe(200);
    expect(document.openapi).toBe('3.1.0');
    expect(unresolvedRefs(document)).toEqual([]);
    for (const item of Object.values(document.paths as Record<string, Json>)) {
      for (const op of Object.values(item)) expect(Object.keys(op.responses).length).toBeGreaterThan(0);
    }
    await answer({ path: '/openapi.json', url: '/openapi.json', status: 200 });
  });
});

describe('answers conform to the document', () => {
  const coverageUrl = (asset: string, query: string) =>
    `/v1/assets/${encodeURIComponent(asset)}/coverage?${query}`;
  const coveragePath = '/v1/assets/{asset}/coverage';
  const window = `start=${hour.start}&end=${day}T02:00:00Z`;

  it('POST /v1/events', async () => {
    const path = '/v1/events';
    const event = { asset: 'api.orders', ...hour, version: 'v1', id: 'api-1' };
    const next = {
      asset: 'api.orders',
      start: hour.end,
      end: `${day}T01:30:00Z`,
      version: 'v1',
      id: 'api-2',
    };
    await answer({ method: 'POST', path, url: path, headers: writer, body: [event, next], status: 202 });
    const invalid = await answer({
      method: 'POST',
      path,
      url: path,
      headers: writer,
      body: [event, { asset: 'api.orders', start: 'soon', end: hour.end }],
      status: 400,
    });
    expect(invalid).toMatchObject({
      code: 'invalid_events',
      errors: [{ index: 1, reason: 'invalid_bound' }],
    });
    await answer({ method: 'POST', path, url: path, headers: writer, body: [], status: 400 });
    const notUtf8 = Buffer.from([0x7b, 0xff, 0x7d]);
    const headers = { ...writer, 'content-type': 'application/json' };
    await answer({ method: 'POST', path, url: path, headers, payload: notUtf8, status: 400 });
    const xml = { ...writer, 'content-type': 'application/xml' };
    await answer({ method: 'POST', path, url: path, headers: xml, payload: '<event/>', status: 415 });
    await answer({ method: 'POST', path, url: path, body: event, status: 401 });
    await answer({ method: 'POST', path, url: path, headers: reader, body: event, status: 403 });
  });

  it('POST /v1/assets/{asset}/replay-requirements', async () => {
    const path = '/v1/assets/{asset}/replay-requirements';
    const url = '/v1/assets/api.orders/replay-requirements';
    // Inside the second hour, so the first one stays covered and triggers.
    const body = { start: hour.end, end: `${day}T01:30:00Z`, version: 'v2', id: 'api-replay' };
    await answer({ method: 'POST', path, url, headers: writer, body, status: 202 });
    await answer({ method: 'POST', path, url, headers: writer, body: [body], status: 400 });
    await answer({ method: 'POST', path, url, headers: writer, body: { ...body, version: '' }, status: 400 });
  });

  it('GET /v1/assets/{asset}/coverage', async () => {
    await waitFor(async () => (await json(coverageUrl('api.orders', window))).replay_required?.length, {
      what: 'the events and the replay requirement ingested',
    });
    const covered = await answer({
      path: coveragePath,
      url: coverageUrl('api.orders', window),
      headers: reader,
      status: 200,
    });
    expect(covered).toMatchObject({ covered: false, missing_count: 1, replay_required_count: 1 });
    await answer({
      path: coveragePath,
      url: coverageUrl('api.orders', `${window}&limit=0&order=newest`),
      headers: reader,
      status: 200,
    });
    await answer({
      path: coveragePath,
      url: coverageUrl('api.orders', `start=${hour.start}`),
      headers: reader,
      status: 400,
    });
    await answer({
      path: coveragePath,
      url: coverageUrl('api.nothing', window),
      headers: reader,
      status: 404,
    });
    await answer({ path: coveragePath, url: coverageUrl('api.orders', window), status: 401 });
    await answer({
      path: coveragePath,
      url: coverageUrl('api.orders', window),
      headers: bearer('x'.repeat(20)),
      status: 403,
    });
    await answer({
      path: coveragePath,
      url: coverageUrl('x'.repeat(7000), window),
      headers: reader,
      status: 414,
    });
  });

  it('refuses an answer that differs from the document', async () => {
    const real = await answer({
      path: coveragePath,
      url: coverageUrl('api.orders', window),
      headers: reader,
      status: 200,
    });
    const errorsOf = (body: unknown) => check('GET', coveragePath, 200, body).errors;
    expect(errorsOf(real)).toBeNull();
    const { ratio: _, ...withoutRatio } = real;
    expect(errorsOf(withoutRatio)).toMatch(/must have required property 'ratio'/);
    expect(errorsOf({ ...real, surprise: 1 })).toMatch(/must NOT have additional properties/);
    expect(errorsOf({ ...real, ratio: '1' })).toMatch(/ratio must be number/);
    expect(errorsOf({ ...real, batches: [{ ...real.batches[0], state: 'done' }] })).toMatch(/allowed values/);
    expect(errorsOf({ ...real, last_event_at: 'yesterday' })).toMatch(/last_event_at/);
    expect(check('GET', coveragePath, 404, { message: 'no code' }).errors).toMatch(/'code'/);
    expect(() => check('GET', coveragePath, 418, {})).toThrow(/no application\/json answer 418/);
  });

  it('GET /v1/assets', async () => {
    const body = await answer({ path: '/v1/assets', url: '/v1/assets', headers: reader, status: 200 });
    expect(body.assets).toContainEqual(expect.objectContaining({ asset: 'api.orders' }));
    await answer({ path: '/v1/assets', url: '/v1/assets', status: 401 });
  });

  it('GET /v1/rollups', async () => {
    const path = '/v1/rollups';
    await answer({ path, url: `${path}?q=API&limit=1`, headers: reader, status: 200 });
    await answer({ path, url: `${path}?limit=0`, headers: reader, status: 400 });
    await answer({ path, url: `${path}?cursor=bogus`, headers: reader, status: 400 });
  });

  it('GET /v1/rollups/{id}/periods and /v1/rollups/{id}/periods/{key}', async () => {
    const path = '/v1/rollups/{id}/periods';
    const url = `/v1/rollups/api_hourly/periods?start=${hour.start}&end=${day}T03:00:00Z&summary=true`;
    await waitFor(async () => (await json(url)).periods?.[0]?.state === 'triggered', {
      what: 'the covered hour triggered',
    });
    const listing = await answer({ path, url, headers: reader, status: 200 });
    expect(listing.summary.length).toBeGreaterThan(0);
    await answer({ path, url: `${url}&state=bogus`, headers: reader, status: 400 });
    await answer({ path, url: `${url}&summary=maybe`, headers: reader, status: 400 });
    await answer({ path, url: '/v1/rollups/nope/periods', headers: reader, status: 404 });

    const detail = '/v1/rollups/{id}/periods/{key}';
    const key = listing.periods[0].key;
    const explained = await answer({
      path: detail,
      url: `/v1/rollups/api_hourly/periods/${key}`,
      headers: reader,
      status: 200,
    });
    expect(explained.triggers.length).toBeGreaterThan(0);
    await answer({
      path: detail,
      url: '/v1/rollups/api_hourly/periods/1999-01-01T00',
      headers: reader,
      status: 404,
    });
  });

  it('POST /v1/runs and POST /v1/rollups/{id}/periods/{key}/retry', async () => {
    const url = `/v1/rollups/api_hourly/periods?start=${hour.start}&end=${hour.end}`;
    const started = await waitFor(
      async () => {
        const period = (await json(url)).periods?.[0];
        return period?.run?.state === 'started' ? period : undefined;
      },
      { what: 'the run started' },
    );
    const path = '/v1/runs';
    const key = `api_hourly@${day.replaceAll('-', '')}T000000Z#1`;
    const report = { idempotency_key: key, attempt: 1, state: 'failed', error: 'boom' };
    const reported = await answer({
      method: 'POST',
      path,
      url: path,
      headers: writer,
      body: report,
      status: 200,
    });
    expect(reported).toMatchObject({
      effect: 'applied',
      current: true,
      run: { state: 'failed', error: 'boom' },
    });
    await answer({
      method: 'POST',
      path,
      url: path,
      headers: writer,
      body: { ...report, state: 'done' },
      status: 400,
    });
    await answer({
      method: 'POST',
      path,
      url: path,
      headers: writer,
      body: { ...report, attempt: 9 },
      status: 404,
    });
    await answer({ method: 'POST', path, url: path, headers: reader, body: report, status: 403 });

    const retry = '/v1/rollups/{id}/periods/{key}/retry';
    const retryUrl = (id: string, k: string) => `/v1/rollups/${id}/periods/${k}/retry`;
    const retried = await answer({
      method: 'POST',
      path: retry,
      url: retryUrl('api_hourly', started.key),
      headers: writer,
      status: 202,
    });
    expect(retried.run).toMatchObject({ attempt: 2, run_id: `${key}~a2` });
    await answer({
      method: 'POST',
      path: retry,
      url: retryUrl('api_hourly', started.key),
      headers: writer,
      status: 409,
    });
    await answer({
      method: 'POST',
      path: retry,
      url: retryUrl('nope', started.key),
      headers: writer,
      status: 404,
    });
  });

  it('POST /v1/rollups/{id}/periods/{start}/trigger', async () => {
    const path = '/v1/rollups/{id}/periods/{start}/trigger';
    const url = (id: string, start: string) =>
      `/v1/rollups/${id}/periods/${encodeURIComponent(start)}/trigger`;
    await answer({ method: 'POST', path, url: url('api_hourly', hour.start), headers: writer, status: 202 });
    await answer({ method: 'POST', path, url: url('api_hourly', 'yesterday'), headers: writer, status: 400 });
    await answer({ method: 'POST', path, url: url('nope', hour.start), headers: writer, status: 404 });
    await answer({ method: 'POST', path, url: url('api_hourly', hour.start), headers: reader, status: 403 });
  });

  it('GET /v1/repairs', async () => {
    const path = '/v1/repairs';
    await waitFor(async () => (await json('/v1/repairs?limit=1')).repairs?.length > 0, {
      what: 'a repair request',
    });
    const page = await answer({ path, url: '/v1/repairs?limit=2&state=open', headers: reader, status: 200 });
    expect(page.repairs[0]).toMatchObject({ asset: 'api.orders', rollup: 'api_hourly', state: 'open' });
    await answer({
      path,
      url: `/v1/repairs?limit=2&cursor=${page.next_cursor}`,
      headers: reader,
      status: 200,
    });
    await answer({ path, url: '/v1/repairs?state=bogus', headers: reader, status: 400 });
    await answer({ path, url: '/v1/repairs?cursor=bogus', headers: reader, status: 400 });
    // The documented listing is `?state=&asset=`: empty parameters filter nothing.
    const unfiltered = await json('/v1/repairs?limit=2');
    const empty = await answer({
      path,
      url: '/v1/repairs?limit=2&state=&asset=',
      headers: reader,
      status: 200,
    });
    expect(empty.counts).toEqual(unfiltered.counts);
    expect(empty.repairs.map((r: { id: number }) => r.id)).toEqual(
      unfiltered.repairs.map((r: { id: number }) => r.id),
    );
    expect(empty.repairs.length).toBeGreaterThan(0);
    await answer({ path, url: path, status: 401 });
  });

  it('POST /v1/repairs', async () => {
    const path = '/v1/repairs';
    // Before the rollup's begin: no request of the scheduler's holds this hour already.
    const before = new Date(Date.now() - 2 * DAY_MS).toISOString().slice(0, 10);
    const window = { asset: 'api.orders', start: `${before}T20:00:00Z`, end: `${before}T21:00:00Z` };
    const target = { type: 'queue', queue: 'api-repairs' };
    const made = await answer({
      method: 'POST',
      path,
      url: path,
      headers: writer,
      body: { ...window, target },
      status: 200,
    });
    expect(made.requested).toMatchObject({
      ranges: [{ start: window.start, end: window.end, kind: 'missing' }],
      sent_to: 'queue api-repairs',
    });
    const held = await answer({
      method: 'POST',
      path,
      url: path,
      headers: writer,
      body: window,
      status: 200,
    });
    expect(held).toMatchObject({ requested: null, open: [made.requested.id] });
    await answer({
      method: 'POST',
      path,
      url: path,
      headers: writer,
      body: { ...window, asset: 'nope' },
      status: 400,
    });
    await answer({
      method: 'POST',
      path,
      url: path,
      headers: writer,
      body: { asset: 'api.orders' },
      status: 400,
    });
    await answer({ method: 'POST', path, url: path, headers: reader, body: window, status: 403 });
  });

  it('GET /v1/graph', async () => {
    const graph = await answer({ path: '/v1/graph', url: '/v1/graph', headers: reader, status: 200 });
    expect(graph.edges).toEqual([{ from: 'asset:api.orders', to: 'rollup:api_hourly', role: 'upstream' }]);
    await answer({ path: '/v1/graph', url: '/v1/graph', status: 401 });
  });

  it('GET /v1/audit', async () => {
    const path = '/v1/audit';
    const page = await answer({ path, url: `${path}?limit=1`, headers: writer, status: 200 });
    expect(page.entries).toHaveLength(1);
    await answer({ path, url: `${path}?limit=1&cursor=${page.next_cursor}`, headers: writer, status: 200 });
    await answer({ path, url: `${path}?cursor=bogus`, headers: writer, status: 400 });
    await answer({ path, url: path, status: 401 });
    await answer({ path, url: path, headers: reader, status: 403 });
  });

  it('the probes and metrics', async () => {
    await answer({ path: '/healthz', url: '/healthz', status: 200 });
    // With read_tokens set, the detail (instance, lease) is for readers; a probe gets the status.
    expect(await answer({ path: '/readyz', url: '/readyz', status: 200 })).toEqual({ status: 'ready' });
    const ready = await answer({ path: '/readyz', url: '/readyz', headers: reader, status: 200 });
    expect(ready).toMatchObject({ status: 'ready', scheduler: expect.any(Object) });
    await answer({ path: '/metrics', url: '/metrics', status: 401 });
    const metrics = await answer({ path: '/metrics', url: '/metrics', headers: reader, status: 200 });
    expect(metrics).toContain('coverage_rollup_');
    // Headers over Node's 16 KB: refused by the HTTP parser before any route, as documented (a
    // real socket: inject() has no parser).
    const big = await fetch(`${daemon.url}/healthz`, { headers: { 'x-big': 'a'.repeat(20_000) } });
    expect(big.status).toBe(431);
    expect(check('GET', '/healthz', 431, await big.json(), 'application/json')).toEqual({ errors: null });
    seen.get('GET /healthz')!.add(431);
  });

  it('covered every operation: a success for each, and an error for each /v1 one', () => {
    for (const [path, item] of Object.entries(document.paths as Record<string, object>)) {
      for (const method of Object.keys(item)) {
        const statuses = [...(seen.get(`${method.toUpperCase()} ${path}`) ?? [])];
        expect(
          statuses.some((s) => s < 300),
          `${method} ${path}`,
        ).toBe(true);
        if (path.startsWith('/v1/'))
          expect(
            statuses.some((s) => s >= 400),
            `${method} ${path}`,
          ).toBe(true);
      }
    }
  });

  it('a client generated by openapi-typescript type-checks a call of every operation, every event spelling and the real answers', async () => {
    const calls: ClientCall[] = callsOfEveryOperation(document);
    // Every operation of the document, whoever added it: no list here to keep up to date.
    for (const [path, item] of Object.entries(document.paths as Record<string, object>))
      for (const method of Object.keys(item))
        expect(
          calls.some((c) => c.path === path && c.method === method),
          `${method} ${path}`,
        ).toBe(true);
    const events = calls.filter((c) => c.path === '/v1/events');
    expect(events.length).toBeGreaterThanOrEqual(2 * 7); // 7 spellings, alone and in an array
    for (const { path, method, status, body } of realAnswers.values()) {
      const op = calls.find((c) => c.path === path && c.method === method)!;
      calls.push({ ...op, answer: { status, body } });
    }
    // What the document refuses, a typed client must refuse too (so this test can fail).
    calls.push(
      { path: '/v1/events', method: 'post', body: { asset: 'a' }, refused: true },
      { path: '/v1/events', method: 'post', body: { asset: 'a', start: true, end: 1 }, refused: true },
      {
        path: '/v1/assets/{asset}/coverage',
        method: 'get',
        parameters: { path: { asset: 'a' } },
        refused: true,
      },
    );
    expect(await typeCheckCalls(document, calls)).toBe('');
  }, 120_000);
});
