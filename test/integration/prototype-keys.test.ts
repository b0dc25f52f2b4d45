/**
 * Keys named `__proto__` or `constructor` are data: an event that carries them (in `extra`, nested,
 * or as unknown top-level fields) is valid JSON and is accepted the same way by every path (HTTP,
 * the queue, `emit`), stored as written, without touching any prototype of the daemon's process.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Daemon } from '../../src/daemon/daemon.js';
import { startTestDaemon, TEST_TOKEN, testConfig, testProducer } from '../helpers/daemon.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { REDIS_URL } from '../helpers/env.js';
import { DAEMON_ENTRY } from '../helpers/process.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const prefix = createTestPrefix();
const dir = mkdtempSync(join(tmpdir(), 'crproto-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let db: TestDatabase;
let daemon: Daemon;
let producer: ReturnType<typeof testProducer>;

beforeAll(async () => {
  db = await createTestDatabase();
  const config = testConfig(db, prefix, { rollups: [] });
  daemon = await startTestDaemon(config);
  producer = testProducer(config);
});

/** The JSON text of an event with prototype-named keys at the top level, in extra, and nested. */
const eventText = (id: string, start: number) =>
  `{"asset":"proto.keys","start":${start},"end":${start + 1},"id":"${id}",` +
  `"__proto__":{"polluted":"top"},"constructor":{"prototype":{"polluted":"top"}},` +
  `"extra":{"__proto__":{"polluted":"extra"},"constructor":{"prototype":{"polluted":"extra"}},` +
  `"nested":[{"__proto__":{"isAdmin":true}}]}}`;

const STORED_EXTRA = {
  constructor: { prototype: { polluted: 'extra' } },
  nested: [{ ['__proto__']: { isAdmin: true } }],
  ['__proto__']: { polluted: 'extra' },
};

/** The event's extra as stored, compared as JSON text (a parsed `__proto__` key would be ambiguous). */
async function storedExtra(id: string): Promise<unknown> {
  const row = await waitFor(
    async () => (await db.sql<{ extra: string }[]>`select extra::text from events where event_id = ${id}`)[0],
    { what: `event ${id} in the log` },
  );
  return JSON.parse(row.extra);
}

function expectNoPollution(): void {
  const probe = {} as Record<string, unknown>;
  expect(probe.polluted).toBeUndefined();
  expect(probe.isAdmin).toBeUndefined();
  expect(Object.getPrototypeOf(probe)).toBe(Object.prototype);
}

function sameJson(actual: unknown, expected: unknown): void {
  const canonical = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(canonical)
      : v !== null && typeof v === 'object'
        ? Object.entries(v)
            .sort(([a], [b]) => (a < b ? -1 : 1))
            .map(([k, x]) => [k, canonical(x)])
        : v;
  expect(canonical(actual)).toEqual(canonical(expected));
}

describe('prototype-named keys', () => {
  it('POST /v1/events accepts them (202) and stores them as data', async () => {
    const response = await fetch(`${daemon.url}/v1/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_TOKEN}` },
      body: `[${eventText('http-1', 10)}]`,
    });
    expect({ status: response.status, body: await response.json() }).toMatchObject({
      status: 202,
      body: { accepted: 1 },
    });
    sameJson(await storedExtra('http-1'), STORED_EXTRA);
    expectNoPollution();
  });

  it('a replay requirement with them in its body is accepted too', async () => {
    const response = await fetch(`${daemon.url}/v1/assets/proto.keys/replay-requirements`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${TEST_TOKEN}` },
      body: '{"start":10,"end":11,"version":"v2","id":"http-req","__proto__":{"type":"completion"}}',
    });
    expect(response.status).toBe(202);
    const row = await waitFor(
      async () => (await db.sql`select replay from events where event_id = 'http-req'`)[0],
      { what: 'the requirement in the log' },
    );
    expect(row.replay).toBe(true);
    expectNoPollution();
  });

  it('the queue ingests them, as job data or as a JSON string', async () => {
    await producer.addBulk([
      { name: 'event', data: JSON.parse(eventText('queue-object', 20)) },
      { name: 'event', data: eventText('queue-text', 30) },
    ]);
    sameJson(await storedExtra('queue-object'), STORED_EXTRA);
    sameJson(await storedExtra('queue-text'), STORED_EXTRA);
    expectNoPollution();
  });

  it('emit enqueues them and the worker ingests them', async () => {
    const config = join(dir, 'config.json');
    writeFileSync(config, JSON.stringify({ database_url: db.url, redis_url: REDIS_URL, queue: { prefix } }));
    const file = join(dir, 'events.jsonl');
    writeFileSync(file, `${eventText('emit-1', 40)}\n`);
    const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const env = { ...process.env };
      for (const key of ['DATABASE_URL', 'REDIS_URL', 'COVERAGE_ROLLUP_CONFIG']) delete env[key];
      execFile(
        process.execPath,
        [DAEMON_ENTRY, 'emit', '--file', file, '--config', config],
        { env, timeout: 30_000 },
        (error, stdout, stderr) =>
          resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr }),
      );
    });
    expect(run).toMatchObject({ code: 0, stdout: expect.stringContaining('enqueued 1 event') });
    sameJson(await storedExtra('emit-1'), STORED_EXTRA);
  });

  it('no event was refused', async () => {
    const metrics = await (await fetch(`${daemon.url}/metrics`)).text();
    // Every reason is exported from 0; none may have counted.
    const rejected = metrics
      .split('\n')
      .filter((l) => l.startsWith('coverage_rollup_events_rejected_total{'));
    expect(rejected.length).toBeGreaterThan(0);
    expect(rejected.filter((l) => !l.endsWith(' 0'))).toEqual([]);
  });
});
