/**
 * The HTTP surface of ingest and coverage, against a whole daemon on an ephemeral port. On Redis
 * POST /v1/events enqueues (202, job ids); run again on the PostgreSQL backend
 * (pg-queue/http-assets-events.test.ts) it commits into the index before answering (200, a
 * result per item), with the same validation and the same per-item errors.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Daemon } from '../../src/daemon/daemon.js';
import { registerDeclaredAssets } from '../../src/store/assets/assets.js';
import { startTestDaemon, TEST_TOKEN, testConfig, testProducer } from '../helpers/daemon.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { testQueueBackend } from '../helpers/env.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { drained } from './ingest-harness.js';

let db: TestDatabase;
let daemon: Daemon;
let producer: ReturnType<typeof testProducer>;
const prefix = createTestPrefix();
/** PostgreSQL backend: events are committed by the request, not enqueued (src/ingest/direct.ts). */
const direct = testQueueBackend() === 'postgres';
const refused = direct ? 'none was committed' : 'none was enqueued';

beforeAll(async () => {
  db = await createTestDatabase();
  const config = testConfig(db, prefix, {
    rollups: [],
    assets: [{ name: 'http.planned', domain: 'time', zone: 'Europe/Berlin' }],
  });
  daemon = await startTestDaemon(config);
  producer = testProducer(config);
});

interface Reply {
  status: number;
  body: Record<string, unknown> & { [k: string]: unknown };
}

async function call(
  method: string,
  path: string,
  body?: unknown,
  token: string | null = TEST_TOKEN,
): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (token !== null) headers.authorization = `Bearer ${token}`;
  const res = await fetch(`${daemon.url}${path}`, {
    method,
    headers,
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, body: (await res.json()) as Reply['body'] };
}

const post = (path: string, body: unknown, token?: string | null) => call('POST', path, body, token);
const get = (path: string) => call('GET', path, undefined, null);
const coverage = (asset: string, query: Record<string, string>) =>
  get(`/v1/assets/${encodeURIComponent(asset)}/coverage?${new URLSearchParams(query)}`);

async function ingest(body: unknown): Promise<Reply> {
  const reply = await post('/v1/events', body);
  expect(reply.status).toBe(direct ? 200 : 202);
  await drained(producer);
  return reply;
}

/** The answer to `n` accepted events: job ids on Redis; per-item results without the queue. */
const accepted = (results: Array<Record<string, unknown>>) =>
  direct
    ? { accepted: results.length, ids: results.map(() => null), results }
    : { accepted: results.length, ids: results.map(() => expect.any(String)) };
const committed = (asset: string) => ({ status: 'committed', asset, seq: expect.any(Number) });

describe('POST /v1/events', () => {
  it(`accepts one event or an array, answering ${direct ? '200 with a result per event' : '202 with job ids'}`, async () => {
    const one = await ingest({ asset: 'http.orders', interval: '2025-06-01T10:00:00Z/PT30M', version: 'v1' });
    expect(one.body).toEqual(accepted([committed('http.orders')]));
    const many = await ingest([
      {
        asset: 'http.orders',
        start: '2025-06-01T12:40:00+02:00',
        end: '2025-06-01T11:00:00Z',
        version: 'v2',
      },
      { asset: 'http.offsets', start: 0, end: '100' },
      { asset: 'http.offsets', start: 150, end: 200 },
    ]);
    expect(many.body).toEqual(
      accepted([committed('http.orders'), committed('http.offsets'), committed('http.offsets')]),
    );
    if (!direct) {
      expect(new Set([...(one.body.ids as string[]), ...(many.body.ids as string[])]).size).toBe(4);
    }
  });

  it('answers 400 with a reason per bad item and ingests none of the batch', async () => {
    const reply = await post('/v1/events', [
      { asset: 'http.rejected', interval: '2025-06-01T10:00:00Z/PT5M' },
      { asset: 'http.rejected', start: 'soon', end: '2025-06-01T10:00:00Z' },
      { asset: 'http.rejected', start: '2025-06-01T10:00:00Z', end: '2025-06-01T09:00:00Z' },
      { start: 1, end: 2 },
      { asset: 'http.orders', start: 1, end: 2 }, // the index holds http.orders as time
      { asset: 'http.rejected', interval: '2025-06-01T10:00:00Z/PT5M', type: 'truncate' },
    ]);
    expect(reply.status).toBe(400);
    expect(reply.body).toEqual({
      code: 'invalid_events',
      message: `5 of 6 events are invalid; ${refused}`,
      errors: [
        { index: 1, reason: 'invalid_bound', message: expect.stringContaining('start "soon"') },
        { index: 2, reason: 'end_before_start', message: expect.stringContaining('before start') },
        { index: 3, reason: 'missing_asset', message: expect.any(String) },
        { index: 4, reason: 'domain_mismatch', message: expect.stringContaining('http.orders') },
        { index: 5, reason: 'unknown_type', message: expect.stringContaining('truncate') },
      ],
    });
    expect((await call('GET', '/v1/assets', undefined, null)).body.assets).not.toContainEqual(
      expect.objectContaining({ asset: 'http.rejected' }),
    );
    expect(await producer.getJobCounts('waiting', 'active')).toEqual({ waiting: 0, active: 0 });
  });

  it('answers 400 for a body that is no event', async () => {
    expect((await post('/v1/events', [])).body).toMatchObject({ code: 'invalid_payload' });
    expect((await post('/v1/events', [])).status).toBe(400);
    const scalar = await post('/v1/events', 42);
    expect(scalar.status).toBe(400);
    expect(scalar.body).toMatchObject({ errors: [{ index: 0, reason: 'invalid_payload' }] });
  });

  it('refuses a batch that gives an asset never seen two domains, as the worker would', async () => {
    const reply = await post('/v1/events', [
      { asset: 'http.fresh', start: 1, end: 2 },
      { asset: 'http.fresh', start: '2025-06-01T10:00:00Z', end: '2025-06-01T10:05:00Z' },
    ]);
    expect(reply.status).toBe(400);
    expect(reply.body).toMatchObject({
      errors: [
        {
          index: 1,
          reason: 'domain_mismatch',
          message: "asset http.fresh holds integer bounds but this event's are time",
        },
      ],
    });
    expect(reply.body.errors).toHaveLength(1);
    expect(await producer.getJobCounts('waiting', 'active')).toEqual({ waiting: 0, active: 0 });
  });

  it('needs a bearer token: 401 without, 403 with a wrong one', async () => {
    const event = { asset: 'http.auth', interval: '2025-06-01T10:00:00Z/PT5M' };
    const without = await post('/v1/events', event, null);
    expect(without).toEqual({ status: 401, body: { code: 'unauthorized', message: expect.any(String) } });
    const wrong = await post('/v1/events', event, 'not-the-token-0123456789');
    expect(wrong).toEqual({ status: 403, body: { code: 'forbidden', message: expect.any(String) } });
    const replay = await post('/v1/assets/http.auth/replay-requirements', { ...event, version: 'v2' }, null);
    expect(replay.status).toBe(401);
    expect(await producer.getJobCounts('waiting', 'active')).toEqual({ waiting: 0, active: 0 });
  });
});

describe('POST /v1/assets/{asset}/replay-requirements', () => {
  it('ingests a requirement for the asset in the path', async () => {
    const reply = await post('/v1/assets/http.orders/replay-requirements', {
      start: '2025-06-01T10:10:00Z',
      end: '2025-06-01T10:20:00Z',
      version: 'v3',
      asset: 'some.other.asset',
    });
    expect(reply.status).toBe(direct ? 200 : 202);
    expect(reply.body).toEqual(accepted([committed('http.orders')]));
    await drained(producer);
  });

  it('refuses a requirement without a version', async () => {
    const reply = await post('/v1/assets/http.orders/replay-requirements', {
      start: '2025-06-01T10:10:00Z',
      end: '2025-06-01T10:20:00Z',
    });
    expect(reply.status).toBe(400);
    expect(reply.body).toMatchObject({
      code: 'invalid_events',
      errors: [{ index: 0, reason: 'invalid_field' }],
    });
    expect((await post('/v1/assets/http.orders/replay-requirements', [1])).status).toBe(400);
    const empty = await post('/v1/assets/http.orders/replay-requirements', {
      start: '2025-06-01T10:10:00Z',
      end: '2025-06-01T10:20:00Z',
      version: '',
    });
    expect(empty.body).toMatchObject({ errors: [{ index: 0, reason: 'invalid_field' }] });
  });
});

describe('GET /v1/assets/{asset}/coverage', () => {
  // http.orders: [10:00, 10:30) v1, [10:40, 11:00) v2, and v3 required over [10:10, 10:20).
  const window = { start: '2025-06-01T09:50:00Z', end: '2025-06-01T11:10:00Z' };
  const batches = [
    { start: '2025-06-01T11:00:00Z', end: '2025-06-01T11:10:00Z', state: 'gap', version: null },
    { start: '2025-06-01T10:40:00Z', end: '2025-06-01T11:00:00Z', state: 'complete', version: 'v2' },
    { start: '2025-06-01T10:30:00Z', end: '2025-06-01T10:40:00Z', state: 'gap', version: null },
    { start: '2025-06-01T10:20:00Z', end: '2025-06-01T10:30:00Z', state: 'complete', version: 'v1' },
    { start: '2025-06-01T10:10:00Z', end: '2025-06-01T10:20:00Z', state: 'replay_required', version: 'v1' },
    { start: '2025-06-01T10:00:00Z', end: '2025-06-01T10:10:00Z', state: 'complete', version: 'v1' },
    { start: '2025-06-01T09:50:00Z', end: '2025-06-01T10:00:00Z', state: 'gap', version: null },
  ];
  const expected = {
    asset: 'http.orders',
    domain: 'time',
    start: '2025-06-01T09:50:00Z',
    end: '2025-06-01T11:10:00Z',
    covered: false,
    ratio: 0.5,
    missing: [
      { start: '2025-06-01T09:50:00Z', end: '2025-06-01T10:00:00Z' },
      { start: '2025-06-01T10:30:00Z', end: '2025-06-01T10:40:00Z' },
      { start: '2025-06-01T11:00:00Z', end: '2025-06-01T11:10:00Z' },
    ],
    replay_required: [
      { start: '2025-06-01T10:10:00Z', end: '2025-06-01T10:20:00Z', version: 'v1', required_version: 'v3' },
    ],
    known_gaps: [{ start: '2025-06-01T10:30:00Z', end: '2025-06-01T10:40:00Z' }],
    batches,
    missing_count: 3,
    missing_total: 1800,
    known_gaps_count: 1,
    replay_required_count: 1,
    truncated: false,
    covered_until: '2025-06-01T11:00:00Z',
    lag_seconds: expect.any(Number),
    last_event_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
    max_lag: null,
    stale: null,
    stale_reason: null,
  };

  it('answers exactly the documented shape', async () => {
    const reply = await coverage('http.orders', window);
    expect(reply.status).toBe(200);
    expect(reply.body).toStrictEqual(expected);
    expect(Object.keys(reply.body)).toEqual([
      'asset',
      'domain',
      'start',
      'end',
      'covered',
      'ratio',
      'missing',
      'replay_required',
      'known_gaps',
      'batches',
      'missing_count',
      'missing_total',
      'known_gaps_count',
      'replay_required_count',
      'truncated',
      'covered_until',
      'lag_seconds',
      'last_event_at',
      'max_lag',
      'stale',
      'stale_reason',
    ]);
  });

  it('reads the window in any offset spelling', async () => {
    const reply = await coverage('http.orders', {
      start: '2025-06-01T11:50:00+02:00',
      end: '2025-06-01T11:10:00.000+0000',
    });
    expect(reply.body).toStrictEqual(expected);
  });

  it('limits batches to the pieces nearest the window end, latest first, and every list to limit', async () => {
    const three = await coverage('http.orders', { ...window, limit: '3' });
    expect(three.body.batches).toEqual(batches.slice(0, 3));
    expect(three.body).toMatchObject({ missing: expected.missing, truncated: true });
    expect((await coverage('http.orders', { ...window, limit: '1000' })).body.batches).toEqual(batches);
    const none = await coverage('http.orders', { ...window, limit: '0' });
    expect(none.body).toMatchObject({ batches: [], missing: [], known_gaps: [], replay_required: [] });
    expect(none.body).toMatchObject({ covered: false, ratio: 0.5, missing_count: 3, truncated: true });
  });

  it('a covered window', async () => {
    const reply = await coverage('http.orders', {
      start: '2025-06-01T10:40:00Z',
      end: '2025-06-01T11:00:00Z',
    });
    expect(reply.body).toMatchObject({
      covered: true,
      ratio: 1,
      missing: [],
      replay_required: [],
      known_gaps: [],
      batches: [
        { start: '2025-06-01T10:40:00Z', end: '2025-06-01T11:00:00Z', state: 'complete', version: 'v2' },
      ],
    });
  });

  it('integer assets answer JSON numbers', async () => {
    const reply = await coverage('http.offsets', { start: '50', end: '300' });
    expect(reply.body).toStrictEqual({
      asset: 'http.offsets',
      domain: 'integer',
      start: 50,
      end: 300,
      covered: false,
      ratio: 100 / 250,
      missing: [
        { start: 100, end: 150 },
        { start: 200, end: 300 },
      ],
      replay_required: [],
      known_gaps: [{ start: 100, end: 150 }],
      batches: [
        { start: 200, end: 300, state: 'gap', version: null },
        { start: 150, end: 200, state: 'complete', version: null },
        { start: 100, end: 150, state: 'gap', version: null },
        { start: 50, end: 100, state: 'complete', version: null },
      ],
      missing_count: 2,
      missing_total: 150,
      known_gaps_count: 1,
      replay_required_count: 0,
      truncated: false,
      covered_until: 200,
      lag_seconds: null,
      last_event_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
      max_lag: null,
      stale: null,
      stale_reason: null,
    });
  });

  it('a declared asset is known before its first event: all of the window is missing', async () => {
    const reply = await coverage('http.planned', {
      start: '2025-06-01T10:00:00',
      end: '2025-06-01T11:00:00',
    });
    expect(reply.status).toBe(200);
    expect(reply.body).toMatchObject({
      covered: false,
      ratio: 0,
      start: '2025-06-01T08:00:00Z',
      missing: [{ start: '2025-06-01T08:00:00Z', end: '2025-06-01T09:00:00Z' }],
      known_gaps: [],
    });
  });

  it('a declaration that contradicts the record is reported, and the record stands', async () => {
    const declared = [
      { name: 'http.planned', domain: 'time' as const, zone: 'Europe/Berlin' },
      { name: 'http.offsets', domain: 'time' as const, zone: 'UTC' },
    ];
    expect(await registerDeclaredAssets(db.sql, declared)).toEqual([
      { declared: declared[1], recorded: { domain: 'integer', zone: 'UTC' } },
    ]);
    expect((await get('/v1/assets')).body.assets).toContainEqual(
      expect.objectContaining({ asset: 'http.offsets', domain: 'integer' }),
    );
  });

  it('404 for an asset never seen', async () => {
    const reply = await coverage('http.nothing', window);
    expect(reply).toEqual({
      status: 404,
      body: { code: 'unknown_asset', message: 'no asset named http.nothing has been seen' },
    });
  });

  it('400 for a bad window or limit, with a message that says what is wrong', async () => {
    const cases: Array<[Record<string, string>, string, RegExp]> = [
      [{ start: window.start }, 'missing_bounds', /\?start=\.\.\.&end=\.\.\./],
      [
        { start: 'yesterday', end: window.end },
        'invalid_bound',
        /start "yesterday" is not an ISO 8601 timestamp/,
      ],
      [
        { start: window.end, end: window.start },
        'end_before_start',
        /end 2025-06-01T09:50:00Z is before start/,
      ],
      [{ ...window, limit: '1001' }, 'invalid_limit', /limit must be an integer from 0 to 1000/],
      [{ ...window, limit: '-1' }, 'invalid_limit', /limit/],
      [{ ...window, limit: 'ten' }, 'invalid_limit', /limit/],
      [
        { start: '2025-06-01T10:00:00.0000001Z', end: window.end },
        'invalid_bound',
        /finer than a microsecond/,
      ],
    ];
    for (const [query, code, message] of cases) {
      const reply = await coverage('http.orders', query);
      expect(reply.status, JSON.stringify(query)).toBe(400);
      expect(reply.body, JSON.stringify(query)).toEqual({ code, message: expect.stringMatching(message) });
    }
    const integer = await coverage('http.offsets', { start: '2025-06-01T10:00:00Z', end: '5' });
    expect(integer.status).toBe(400);
    expect(integer.body).toMatchObject({ code: 'invalid_bound' });
  });
});

describe('GET /v1/assets', () => {
  it('lists every asset with its facts', async () => {
    await waitFor(async () => (await get('/v1/assets')).body.assets, { what: 'assets' });
    const reply = await get('/v1/assets');
    expect(reply.status).toBe(200);
    const assets = reply.body.assets as Array<Record<string, unknown>>;
    expect(assets.map((a) => a.asset)).toEqual(['http.offsets', 'http.orders', 'http.planned']);
    expect(assets[0]).toStrictEqual({
      asset: 'http.offsets',
      domain: 'integer',
      zone: 'UTC',
      event_count: 2,
      segment_count: 2,
      covered_extent: { start: 0, end: 200 },
      updated_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
      covered_until: 200,
      lag_seconds: null,
      last_event_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
      max_lag: null,
      stale: null,
      stale_reason: null,
    });
    expect(assets[1]).toMatchObject({
      asset: 'http.orders',
      domain: 'time',
      event_count: 3,
      segment_count: 4,
      covered_extent: { start: '2025-06-01T10:00:00Z', end: '2025-06-01T11:00:00Z' },
    });
    expect(assets[2]).toMatchObject({
      asset: 'http.planned',
      domain: 'time',
      zone: 'Europe/Berlin',
      event_count: 0,
      covered_extent: null,
    });
    expect(reply.body).toMatchObject({ total: 3, next_cursor: null });
  });

  it('pages by name with a cursor, filters by q, and refuses a bad limit or cursor', async () => {
    const first = await get('/v1/assets?limit=2');
    expect(first.body).toMatchObject({
      assets: [{ asset: 'http.offsets' }, { asset: 'http.orders' }],
      total: 3,
      next_cursor: expect.any(String),
    });
    expect(first.body.assets).toHaveLength(2);
    const second = await get(`/v1/assets?limit=2&cursor=${first.body.next_cursor}`);
    expect(second.body).toMatchObject({ assets: [{ asset: 'http.planned' }], total: 3, next_cursor: null });
    const filtered = await get('/v1/assets?q=ORD');
    expect(filtered.body).toMatchObject({ assets: [{ asset: 'http.orders' }], total: 1, next_cursor: null });
    expect((await get('/v1/assets?limit=0')).body).toMatchObject({ code: 'invalid_limit' });
    expect((await get('/v1/assets?cursor=bm9wZQ')).body).toMatchObject({ code: 'invalid_cursor' });
    // A cursor of another listing is refused rather than read as a name.
    const rollupCursor = Buffer.from('r.2').toString('base64url');
    expect((await get(`/v1/assets?cursor=${rollupCursor}`)).status).toBe(400);
  });
});

describe('long asset names', () => {
  it('serves every name the worker accepts, up to 512 characters percent-encoded', async () => {
    const name = `s3://bucket/${'ü/'.repeat(250)}`;
    expect(name.length).toBe(512);
    await ingest({ asset: name, start: '2025-06-01T10:00:00Z', end: '2025-06-01T11:00:00Z' });
    const reply = await coverage(name, { start: '2025-06-01T10:00:00Z', end: '2025-06-01T11:00:00Z' });
    expect(reply.status).toBe(200);
    expect(reply.body).toMatchObject({ asset: name, covered: true });
    const replay = await post(`/v1/assets/${encodeURIComponent(name)}/replay-requirements`, {
      start: '2025-06-01T10:00:00Z',
      end: '2025-06-01T10:30:00Z',
      version: 'v2',
    });
    expect(replay.status).toBe(direct ? 200 : 202);
    await drained(producer);
  });

  it('answers a path parameter longer than any asset name with the usual error shape', async () => {
    const reply = await coverage('x'.repeat(7000), {
      start: '2025-06-01T10:00:00Z',
      end: '2025-06-01T11:00:00Z',
    });
    expect(reply).toEqual({
      status: 414,
      body: { code: 'fst_err_max_param_length', message: expect.any(String) },
    });
  });
});
