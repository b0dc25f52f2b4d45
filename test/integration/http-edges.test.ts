/**
 * The edges of the HTTP API a fuzzing probe found (issue 53), over the wire against the listening
 * daemon: bodies of other types than JSON, empty query parameters, methods a path does not take,
 * and connections that send nothing. docs/http-api.md states each rule.
 */
import { request } from 'node:http';
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { HEADERS_TIMEOUT_MS, REQUEST_TIMEOUT_MS, TIMEOUT_CHECK_MS } from '../../src/http/timeouts.js';
import { startTestDaemon, TEST_TOKEN, testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';

const db = await createTestDatabase();
const prefix = createTestPrefix();
const daemon = await startTestDaemon(
  testConfig(db, prefix, {
    rollups: [
      {
        id: 'edge_hourly',
        upstream: ['edge.orders'],
        every: 'hour',
        begin: '2025-06-01',
        target: { type: 'queue', queue: 'edge-runs' },
      },
    ],
  }),
);
const { hostname, port } = new URL(daemon.url);

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: Record<string, unknown> | undefined;
}

/** A request over node:http, which sends any method (fetch refuses TRACE), with the write token. */
function send(
  method: string,
  path: string,
  { headers = {}, body }: { headers?: Record<string, string>; body?: Buffer | string } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: hostname, port, method, path, headers: { authorization: `Bearer ${TEST_TOKEN}`, ...headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({
            status: res.statusCode!,
            headers: res.headers,
            // The status page answers HTML.
            body:
              text && res.headers['content-type']?.startsWith('application/json')
                ? JSON.parse(text)
                : undefined,
          });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const json = { 'content-type': 'application/json' };
/** `{"asset":"ct.<FF FE>utf",...}`: not UTF-8. */
const notUtf8 = Buffer.concat([
  Buffer.from('{"asset":"ct.'),
  Buffer.from([0xff, 0xfe]),
  Buffer.from('utf","start":1,"end":2}'),
]);

describe('request bodies', () => {
  it('refuses a body of another type than JSON with 415, bad UTF-8 or not, and creates nothing', async () => {
    for (const type of ['text/plain', 'text/plain; charset=utf-8', 'application/x-www-form-urlencoded']) {
      const answer = await send('POST', '/v1/events', { headers: { 'content-type': type }, body: notUtf8 });
      expect(answer.status, type).toBe(415);
      expect(answer.body).toMatchObject({ code: 'fst_err_ctp_invalid_media_type' });
      expect(answer.body?.message).toMatch(/send JSON as application\/json/);
    }
    const valid = '{"asset":"ct.plain","start":1,"end":2}';
    const plain = await send('POST', '/v1/events', {
      headers: { 'content-type': 'text/plain' },
      body: valid,
    });
    expect(plain.status).toBe(415);
    // The same bytes as JSON: refused for what they are.
    const asJson = await send('POST', '/v1/events', { headers: json, body: notUtf8 });
    expect(asJson).toMatchObject({
      status: 400,
      body: { code: 'invalid_json', message: 'the body is not valid UTF-8' },
    });
    const assets = await send('GET', '/v1/assets?q=ct.');
    expect(assets.body).toMatchObject({ total: 0 });
  });

  it('takes an empty body of any type as no body', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded']) {
      const answer = await send('POST', '/v1/rollups/edge_hourly/periods/2025-06-01T10/trigger', {
        headers: { 'content-type': type },
        body: '',
      });
      expect(answer.status, type).toBe(202);
    }
  });
});

describe('event fields', () => {
  it('refuses a version that is a fraction or an unsafe integer, as it refuses such an id', async () => {
    for (const field of ['version', 'id']) {
      for (const value of ['1.5', '123456789012345678901234567890']) {
        const body = `{"asset":"edge.orders","start":"2025-06-01T10:00:00Z","end":"2025-06-01T11:00:00Z","${field}":${value}}`;
        const answer = await send('POST', '/v1/events', { headers: json, body });
        expect(answer.status, `${field} ${value}`).toBe(400);
        expect(answer.body).toMatchObject({
          code: 'invalid_events',
          errors: [{ index: 0, reason: 'invalid_field' }],
        });
        const [error] = answer.body!.errors as Array<{ message: string }>;
        expect(error!.message).toMatch(new RegExp(`^${field} must be a string or a safe integer, got `));
      }
    }
  });

  it('takes null for produced_at and extra as absent, as the document says', async () => {
    const event = {
      asset: 'edge.orders',
      start: '2025-06-01T10:00:00Z',
      end: '2025-06-01T10:05:00Z',
      produced_at: null,
      extra: null,
      version: 3,
    };
    const answer = await send('POST', '/v1/events', { headers: json, body: JSON.stringify(event) });
    // 202 enqueued on Redis, 200 committed where the queue is in PostgreSQL (TEST_QUEUE_BACKEND).
    expect([200, 202]).toContain(answer.status);
  });
});

describe('query parameters', () => {
  it('takes an optional parameter sent empty as absent, and a required one as missing', async () => {
    const absent = await send('GET', '/v1/rollups/edge_hourly/periods?end=2025-06-02');
    const empty = await send('GET', '/v1/rollups/edge_hourly/periods?end=2025-06-02&limit=&state=&cursor=');
    expect(absent.status).toBe(200);
    expect(empty).toMatchObject({ status: 200, body: { counts: absent.body?.counts } });
    const window = await send('GET', '/v1/assets/edge.orders/coverage?start=&end=');
    expect(window).toMatchObject({ status: 400, body: { code: 'missing_bounds' } });
    // A cursor is one the listing issued: no schema can say which, so the document says so.
    const cursor = await send('GET', '/v1/rollups?cursor=n');
    expect(cursor).toMatchObject({ status: 400, body: { code: 'invalid_cursor' } });
  });
});

describe('U+0000 (NUL), which PostgreSQL can neither store nor compare', () => {
  it('refuses it in a parameter, a cursor or a text field with 400, where it failed the read with 500', async () => {
    const cursor = Buffer.from('a.a\u0000b').toString('base64url');
    for (const path of [
      '/v1/assets?q=a%00',
      `/v1/assets?cursor=${cursor}`,
      '/v1/assets/a%00b/coverage?start=1&end=2',
      '/v1/repairs?asset=a%00',
      '/?asset=a%00',
      '/?q=a%00',
    ]) {
      const answer = await send('GET', path);
      expect(answer.status, path).toBe(400);
    }
    for (const body of [
      { idempotency_key: 'edge_hourly@20250601T100000Z#1\u0000', attempt: 1, state: 'running' },
      { idempotency_key: 'edge_hourly@20250601T100000Z#1', attempt: 1, state: 'failed', error: 'x\u0000' },
    ]) {
      const answer = await send('POST', '/v1/runs', { headers: json, body: JSON.stringify(body) });
      expect(answer.status, JSON.stringify(body)).toBe(400);
    }
  });
});

describe('methods', () => {
  it('answers 405 with Allow for a method a known path does not take, before reading a body', async () => {
    for (const method of ['TRACE', 'OPTIONS', 'PUT', 'DELETE', 'PATCH', 'QUERY']) {
      const answer = await send(method, '/healthz');
      expect(answer.status, method).toBe(405);
      expect(answer.headers.allow, method).toBe('GET, HEAD');
      expect(answer.body).toMatchObject({ code: 'method_not_allowed' });
    }
    // QUERY with a body, PUT with a body of a type no route reads: 405 all the same.
    const query = await send('QUERY', '/v1/assets', { headers: json, body: '{}' });
    expect(query).toMatchObject({ status: 405, headers: { allow: 'GET, HEAD' } });
    const put = await send('PUT', '/v1/events', { headers: { 'content-type': 'text/plain' }, body: 'x' });
    expect(put).toMatchObject({ status: 405, headers: { allow: 'POST' } });
    const head = await send('HEAD', '/v1/events');
    expect(head).toMatchObject({ status: 405, headers: { allow: 'POST' } });
    // Paths with parameters match any value of them.
    const detail = await send('DELETE', '/v1/rollups/any/periods/any');
    expect(detail).toMatchObject({ status: 405, headers: { allow: 'GET, HEAD' } });
  });

  it('answers 404 for a path no method takes, whatever the method', async () => {
    for (const method of ['GET', 'TRACE', 'QUERY']) {
      const answer = await send(method, '/v1/nowhere');
      expect(answer, method).toMatchObject({ status: 404, body: { code: 'not_found' } });
    }
  });
});

/** Opens a connection, writes `bytes` (if any), and resolves with what came back and when it closed. */
function idleConnection(bytes?: string): Promise<{ closedAfterMs: number; received: string }> {
  return new Promise((resolve, reject) => {
    const opened = Date.now();
    let received = '';
    const socket = connect(Number(port), hostname, () => {
      if (bytes) socket.write(bytes);
    });
    socket.on('data', (chunk) => {
      received += chunk.toString('utf8');
    });
    socket.on('error', reject);
    socket.on('close', () => resolve({ closedAfterMs: Date.now() - opened, received }));
  });
}

describe('timeouts', () => {
  // Node's defaults closed these at 60-90 s; the bound is HEADERS_TIMEOUT_MS, checked every
  // TIMEOUT_CHECK_MS. The deadline leaves a loaded machine ample room and stays far below 60 s.
  const bound = HEADERS_TIMEOUT_MS + TIMEOUT_CHECK_MS;
  const deadline = bound + 15_000;

  it(
    'closes a connection that sends nothing, or headers that never end, with 408 within the headers timeout',
    async () => {
      const [silent, partial] = await Promise.all([
        idleConnection(),
        idleConnection('GET /healthz HTTP/1.1\r\nHost: x\r\n'),
      ]);
      for (const { closedAfterMs, received } of [silent, partial]) {
        expect(received).toMatch(/^HTTP\/1\.1 408 /);
        expect(closedAfterMs).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 100);
        expect(closedAfterMs).toBeLessThan(deadline);
      }
    },
    deadline + 10_000,
  );

  it('bounds a whole request, which fastify leaves unbounded by default', () => {
    expect(daemon.http.server.requestTimeout).toBe(REQUEST_TIMEOUT_MS);
    expect(daemon.http.server.headersTimeout).toBe(HEADERS_TIMEOUT_MS);
  });
});
