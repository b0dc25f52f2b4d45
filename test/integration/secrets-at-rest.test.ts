import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { startDaemon } from '../../src/daemon/daemon.js';
import { migrate, readMigrations } from '../../src/store/upkeep/migrate.js';
import { createLogger } from '../../src/support/log.js';
import { testConfig, testProducer } from '../helpers/daemon.js';
import { createEmptyDatabase, createTestDatabase } from '../helpers/db.js';
import { startFakeAirflow } from '../helpers/fake-airflow.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

// Secrets given literally and by {env: NAME} reach the targets, and after a full trigger cycle no
// table holds any of them (nor any JWT Airflow issued), and no log line does either.
const LITERAL_HEADER = 'literalHeaderSecret7f3a9c';
const LITERAL_PASSWORD = 'literalPasswordSecret2b8e41';
const ENV_HEADER = 'envHeaderSecret5d1c77';
const ENV_PASSWORD = 'envPasswordSecret9a0f32';
const LATE_HEADER = 'lateHeaderSecret3e6b18';

const airflow = await startFakeAirflow({
  users: { coverage: LITERAL_PASSWORD, 'env-user': ENV_PASSWORD },
});
const STATIC_TOKEN = airflow.mint('static-user', 86_400);
process.env.CR_TEST_HOOK_KEY = ENV_HEADER;
process.env.CR_TEST_AF_USER = 'env-user';
process.env.CR_TEST_AF_PASSWORD = ENV_PASSWORD;
process.env.CR_TEST_AF_TOKEN = STATIC_TOKEN;
process.env.CR_TEST_LATE_KEY = LATE_HEADER;

const hooks: { path: string; headers: IncomingHttpHeaders }[] = [];
const server = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    hooks.push({ path: req.url ?? '', headers: req.headers });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  });
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const hookUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await airflow.close();
});

const db = await createTestDatabase();
const prefix = createTestPrefix();
const hourly = (id: string, target: Record<string, unknown>) => ({
  id,
  upstream: [`s.${id}`],
  every: 'hour',
  begin: '2026-11-02',
  target,
});
const config = testConfig(db, prefix, {
  log_level: 'trace',
  rollups: [
    hourly('s_hook', {
      type: 'webhook',
      url: `${hookUrl}/hook`,
      headers: { Authorization: `Bearer ${LITERAL_HEADER}`, 'X-Api-Key': { env: 'CR_TEST_HOOK_KEY' } },
    }),
    hourly('s_af', {
      type: 'airflow',
      url: airflow.url,
      dag_id: 'd1',
      username: 'coverage',
      password: LITERAL_PASSWORD,
    }),
    hourly('s_af_env', {
      type: 'airflow',
      url: airflow.url,
      dag_id: 'd2',
      username: { env: 'CR_TEST_AF_USER' },
      password: { env: 'CR_TEST_AF_PASSWORD' },
    }),
    hourly('s_static', {
      type: 'airflow',
      url: airflow.url,
      dag_id: 'd3',
      token: { env: 'CR_TEST_AF_TOKEN' },
    }),
    hourly('s_late', {
      type: 'webhook',
      url: `${hookUrl}/late`,
      headers: { 'X-Api-Key': { env: 'CR_TEST_LATE_KEY' } },
    }),
  ],
});
const logs: string[] = [];
const daemon = await startDaemon(
  config,
  createLogger(
    'trace',
    new Writable({
      write(chunk, _encoding, done) {
        logs.push(String(chunk));
        done();
      },
    }),
  ),
);
afterAll(() => daemon.stop());
const producer = testProducer(config);

const HOUR = '2026-11-02T10:00:00Z';
const cover = (rollup: string, start = HOUR) =>
  producer.add('e', {
    asset: `s.${rollup}`,
    start,
    end: new Date(Date.parse(start) + 3_600_000).toISOString(),
    version: 'v1',
  });
const trigger = async (rollup: string) => {
  const [row] = await db.sql<
    { delivered_at: Date | null; failed_at: Date | null; last_error: string | null }[]
  >`
    select delivered_at, failed_at, last_error from triggers where rollup_id = ${rollup}`;
  return row;
};
const delivered = (rollup: string) =>
  waitFor(async () => ((await trigger(rollup))?.delivered_at ? trigger(rollup) : undefined), {
    what: `delivery of ${rollup}`,
  });

/** Rows of every table in the schema whose text (all columns) contains `needle`, per table. */
async function tablesContaining(needle: string): Promise<Record<string, number>> {
  const tables = await db.sql<{ name: string }[]>`
    select table_name as name from information_schema.tables
    where table_schema = current_schema() and table_type = 'BASE TABLE'`;
  const found: Record<string, number> = {};
  for (const { name } of tables) {
    const [row] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from ${db.sql(name)} as t where t::text like ${`%${needle}%`}`;
    if (row!.n > 0) found[name] = row!.n;
  }
  return found;
}

describe('secrets are resolved at delivery and never stored', () => {
  it('delivers with the literal and referenced secrets', async () => {
    for (const rollup of ['s_hook', 's_af', 's_af_env', 's_static']) await cover(rollup);
    for (const rollup of ['s_hook', 's_af', 's_af_env', 's_static'])
      expect(await delivered(rollup)).toMatchObject({ last_error: null, failed_at: null });
    const [hook] = hooks.filter((h) => h.path === '/hook');
    expect(hook!.headers.authorization).toBe(`Bearer ${LITERAL_HEADER}`);
    expect(hook!.headers['x-api-key']).toBe(ENV_HEADER);
    expect(airflow.to('/auth/token').map((r) => r.body)).toEqual(
      expect.arrayContaining([
        { username: 'coverage', password: LITERAL_PASSWORD },
        { username: 'env-user', password: ENV_PASSWORD },
      ]),
    );
    expect(airflow.to('/api/v2/dags/d3/dagRuns')[0]!.headers.authorization).toBe(`Bearer ${STATIC_TOKEN}`);
  });

  it('an unset variable at delivery is a clear, retried error; set again, the trigger is delivered', async () => {
    delete process.env.CR_TEST_LATE_KEY;
    await cover('s_late');
    const failing = await waitFor(async () => (await trigger('s_late'))?.last_error, {
      what: 'a failed attempt',
    });
    expect(failing).toBe('environment variable CR_TEST_LATE_KEY (headers.X-Api-Key) not set in this process');
    expect(await trigger('s_late')).toMatchObject({ delivered_at: null, failed_at: null });
    process.env.CR_TEST_LATE_KEY = LATE_HEADER;
    expect(await delivered('s_late')).toMatchObject({ last_error: null, failed_at: null });
    expect(hooks.filter((h) => h.path === '/late').map((h) => h.headers['x-api-key'])).toEqual([LATE_HEADER]);
  });

  it('stores references and placeholders only', async () => {
    const rows = await db.sql<{ id: string; target: unknown }[]>`
      select id, definition->'target' as target from rollups order by id`;
    const stored = Object.fromEntries(rows.map((r) => [r.id, r.target]));
    expect(stored.s_hook).toMatchObject({
      headers: { Authorization: { redacted: true }, 'X-Api-Key': { env: 'CR_TEST_HOOK_KEY' } },
    });
    expect(stored.s_af).toMatchObject({ username: 'coverage', password: { redacted: true } });
    expect(stored.s_af_env).toMatchObject({
      username: { env: 'CR_TEST_AF_USER' },
      password: { env: 'CR_TEST_AF_PASSWORD' },
    });
    const [outbox] = await db.sql<
      { target: unknown }[]
    >`select target from triggers where rollup_id = 's_af'`;
    expect(outbox!.target).toEqual(stored.s_af);
  });

  it('no table and no log line holds a secret value or an issued JWT', async () => {
    // The scan finds what is there: the airflow username and the variable names are stored.
    expect(await tablesContaining('CR_TEST_AF_PASSWORD')).toEqual({ rollups: 1, triggers: 1 });
    expect(Object.keys(await tablesContaining('coverage'))).toEqual(expect.arrayContaining(['rollups']));
    expect(airflow.issued.length).toBeGreaterThanOrEqual(2);
    const secrets = [
      LITERAL_HEADER,
      LITERAL_PASSWORD,
      ENV_HEADER,
      ENV_PASSWORD,
      LATE_HEADER,
      STATIC_TOKEN,
      ...airflow.issued,
    ];
    for (const secret of secrets)
      expect({ secret, found: await tablesContaining(secret) }).toEqual({ secret, found: {} });
    expect(logs.length).toBeGreaterThan(10);
    const text = logs.join('');
    for (const secret of secrets) expect(text.includes(secret), secret).toBe(false);
  });
});

describe('migration scrubbing stored secrets', () => {
  it('replaces literal secrets stored by earlier versions with placeholders, keeping references', async () => {
    const old = await createEmptyDatabase();
    const log = createLogger('silent');
    const migrations = readMigrations();
    const scrub = migrations.findIndex((m) => m.name === 'secrets_by_reference');
    await migrate(old.sql, log, migrations.slice(0, scrub));
    const airflowTarget = {
      type: 'airflow',
      url: 'http://af',
      dag_id: 'd',
      username: 'u',
      password: LITERAL_PASSWORD,
      token: { env: 'AF_TOKEN' },
      timeout: 10000,
    };
    const webhookTarget = {
      type: 'webhook',
      url: 'http://hook',
      headers: { Authorization: LITERAL_HEADER, 'X-Key': { env: 'K' } },
      timeout: 10000,
    };
    const queueTarget = { type: 'queue', queue: 'q' };
    for (const [id, target] of [
      ['a', airflowTarget],
      ['w', webhookTarget],
      ['q', queueTarget],
    ] as const) {
      await old.sql`
        insert into rollups (id, definition, calendar_hash, definition_hash)
        values (${id}, ${old.sql.json({ id, target } as never)}, 'c', 'h')`;
      await old.sql`insert into periods (rollup_id, lo, hi, key) values (${id}, 0, 1, 'k')`;
      await old.sql`
        insert into triggers (rollup_id, period_lo, generation, idempotency_key, reason, lease_token, target, payload)
        values (${id}, 0, 1, ${`${id}@k#1`}, 'covered', 1, ${old.sql.json(target as never)}, '{}')`;
    }
    await migrate(old.sql, log, migrations.slice(0, scrub + 1));
    const rollups = await old.sql<{ id: string; target: unknown; definition_hash: string }[]>`
      select id, definition->'target' as target, definition_hash from rollups order by id`;
    const triggers = await old.sql<{ rollup_id: string; target: unknown }[]>`
      select rollup_id, target from triggers order by rollup_id`;
    const scrubbedAirflow = { ...airflowTarget, password: { redacted: true } };
    const scrubbedWebhook = {
      ...webhookTarget,
      headers: { Authorization: { redacted: true }, 'X-Key': { env: 'K' } },
    };
    expect(rollups).toEqual([
      { id: 'a', target: scrubbedAirflow, definition_hash: 'scrubbed' },
      { id: 'q', target: queueTarget, definition_hash: 'h' },
      { id: 'w', target: scrubbedWebhook, definition_hash: 'scrubbed' },
    ]);
    expect(triggers).toEqual([
      { rollup_id: 'a', target: scrubbedAirflow },
      { rollup_id: 'q', target: queueTarget },
      { rollup_id: 'w', target: scrubbedWebhook },
    ]);
  });
});
