/**
 * Many HTTP clients and scripts send `content-type: application/json` on every POST, with no body
 * for the action endpoints (retry a period's run, trigger a period). Over real HTTP (fetch against
 * the listening daemon, so `content-length: 0` is on the wire): an empty body with a JSON content
 * type is no body. The actions answer as without the header; a route that needs a body answers
 * its own validation error; malformed non-empty JSON is still refused.
 */
import { describe, expect, it } from 'vitest';
import { startTestDaemon, TEST_TOKEN, testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const DAY_MS = 86_400_000;
// Yesterday's first hour: a whole period in the past, so covering it triggers it.
const day = new Date(Date.now() - DAY_MS).toISOString().slice(0, 10);
const hour = { start: `${day}T00:00:00Z`, end: `${day}T01:00:00Z` };

const db = await createTestDatabase();
const prefix = createTestPrefix();
const daemon = await startTestDaemon(
  testConfig(db, prefix, {
    rollups: [
      {
        id: 'e_hourly',
        upstream: ['e.orders'],
        every: 'hour',
        begin: day,
        target: { type: 'queue', queue: 'empty-body-runs' },
      },
    ],
  }),
);

const auth = `Bearer ${TEST_TOKEN}`;

/** A POST over the wire with `headers` and, when given, `body` as sent (no body otherwise). */
async function post(path: string, headers: Record<string, string>, body?: string) {
  const response = await fetch(`${daemon.url}${path}`, {
    method: 'POST',
    headers: { authorization: auth, ...headers },
    ...(body === undefined ? {} : { body }),
  });
  const text = await response.text();
  return { status: response.status, body: (text ? JSON.parse(text) : undefined) as Record<string, unknown> };
}

const JSON_TYPE = { 'content-type': 'application/json' };
const periodsUrl = `/v1/rollups/e_hourly/periods?start=${hour.start}&end=${hour.end}`;

describe('an empty body with a JSON content type', () => {
  it('is no body for the retry and trigger actions; a retry with it starts the next attempt', async () => {
    const sent = await post(
      '/v1/events',
      JSON_TYPE,
      JSON.stringify({ asset: 'e.orders', ...hour, id: 'e-1' }),
    );
    expect(sent.status).toBe(202);
    const period = await waitFor(
      async () => {
        const response = await fetch(`${daemon.url}${periodsUrl}`, { headers: { authorization: auth } });
        const listed = (await response.json()) as {
          periods?: Array<{ key: string; run?: { state: string } }>;
        };
        const first = listed.periods?.[0];
        return first?.run?.state === 'started' ? first : undefined;
      },
      { what: 'the run of the hour to start' },
    );
    const key = `e_hourly@${day.replaceAll('-', '')}T000000Z#1`;
    const failed = await post(
      '/v1/runs',
      JSON_TYPE,
      JSON.stringify({ idempotency_key: key, attempt: 1, state: 'failed', error: 'boom' }),
    );
    expect(failed.status).toBe(200);

    const retryPath = `/v1/rollups/e_hourly/periods/${period.key}/retry`;
    const retried = await post(retryPath, JSON_TYPE, '');
    expect(retried).toMatchObject({ status: 202, body: { run: { attempt: 2, run_id: `${key}~a2` } } });
    // The same with a charset parameter and with no body at all: the handler answers (the run is
    // open now, so not retryable), not the body parser.
    const again = await post(retryPath, { 'content-type': 'application/json; charset=utf-8' }, '');
    expect(again).toMatchObject({ status: 409, body: { code: 'not_retryable' } });
    expect(await post(retryPath, {})).toMatchObject({ status: 409, body: { code: 'not_retryable' } });

    const trigger = `/v1/rollups/e_hourly/periods/${encodeURIComponent(hour.start)}/trigger`;
    expect(await post(trigger, JSON_TYPE, '')).toMatchObject({ status: 202, body: { requested: true } });
    expect(await post(trigger, JSON_TYPE, '{}')).toMatchObject({ status: 202, body: { requested: true } });
  });

  it('is a missing body where one is required: the route answers its own validation error', async () => {
    expect(await post('/v1/events', JSON_TYPE, '')).toMatchObject({
      status: 400,
      body: { code: 'invalid_payload' },
    });
    expect(await post('/v1/runs', JSON_TYPE, '')).toMatchObject({
      status: 400,
      body: { code: 'invalid_request', message: expect.stringContaining('body') },
    });
  });

  it('does not excuse malformed JSON: a body that is not JSON is still a 400', async () => {
    const trigger = `/v1/rollups/e_hourly/periods/${encodeURIComponent(hour.start)}/trigger`;
    for (const body of ['{', ' ', 'null x']) {
      const answer = await post(trigger, JSON_TYPE, body);
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(answer.body.code).toBe('fst_err_ctp_invalid_json_body');
    }
  });
});
