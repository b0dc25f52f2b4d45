import { describe, expect, it } from 'vitest';
import { defaultDemoDatabase, demoConfig, isDemoDatabase } from '../../../src/cli/commands/demo.js';
import { ConfigError, loadConfig, maxLags, parseConfig } from '../../../src/config/index.js';
import { defineRollups } from '../../../src/config/rollups.js';
import { combineCounts, missedBefore, periodsEnd } from '../../../src/core/periods/periods.js';

describe('configuration', () => {
  it('serves defaults with no file', () => {
    const config = loadConfig({ env: {} });
    expect(config.queue.name).toBe('asset-events');
    expect(config.queue.dead_letter).toBe('asset-events-dead');
    expect(config.http.port).toBe(8080);
    expect(config.rollups).toEqual([]);
  });

  it('listens on this machine only with the embedded database, on every interface with a URL, as http.host says otherwise', () => {
    expect(loadConfig({ env: {} }).http.host).toBe('127.0.0.1');
    expect(loadConfig({ env: { DATABASE_URL: 'postgres://db/x' } }).http.host).toBe('0.0.0.0');
    expect(loadConfig({ env: { REDIS_URL: 'redis://r:1' } }).http.host).toBe('0.0.0.0');
    expect(parseConfig({ http: { host: '0.0.0.0' } }).http.host).toBe('0.0.0.0');
    expect(parseConfig({ http: { port: 9 } }).http).toMatchObject({ host: '127.0.0.1', port: 9 });
    expect(loadConfig({ env: { HTTP_HOST: '0.0.0.0' } }).http.host).toBe('0.0.0.0');
    expect(loadConfig({ env: { HTTP_HOST: '10.0.0.7', DATABASE_URL: 'postgres://db/x' } }).http.host).toBe(
      '10.0.0.7',
    );
  });

  it('takes environment overrides over the file', () => {
    const config = loadConfig({
      path: 'config/example.yaml',
      env: {
        DATABASE_URL: 'postgres://db/x',
        DATABASE_READ_URL: 'postgres://replica/x',
        REDIS_URL: 'redis://r:1',
        PORT: '9999',
        LOG_LEVEL: 'warn',
        LOG_FORMAT: 'Pretty',
        API_TOKENS: 'aaaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbb',
      },
    });
    expect(config.log_format).toBe('pretty');
    expect(config.database_url).toBe('postgres://db/x');
    expect(config.database_read_url).toBe('postgres://replica/x');
    expect(config.redis_url).toBe('redis://r:1');
    expect(config.http.port).toBe(9999);
    expect(config.log_level).toBe('warn');
    expect(config.api_tokens).toEqual(['aaaaaaaaaaaaaaaa', 'bbbbbbbbbbbbbbbb']);
  });

  it('reads from the primary unless a replica is configured, refusing a max lag under a second', () => {
    const config = loadConfig({ env: {} });
    expect(config.database_read_url).toBeUndefined();
    expect(config.database_read_max_lag).toBe(5_000);
    expect(parseConfig({ database_read_max_lag: 'PT30S' }).database_read_max_lag).toBe(30_000);
    expect(() => parseConfig({ database_read_max_lag: 'PT0.5S' })).toThrow(
      'database_read_max_lag: must be at least PT1S',
    );
  });

  it('accepts the example file and every rollup in it', () => {
    const config = loadConfig({ path: 'config/example.yaml', env: {} });
    // It names no database and no Redis, so it starts where Node.js alone is installed.
    expect(config.database_url).toBe('embedded');
    expect(config.queue.backend).toBe('postgres');
    expect(defineRollups(config).map((r) => r.rollup.id)).toEqual([
      'orders_hourly',
      'orders_daily',
      'clicks_compaction',
    ]);
  });

  it('the example does not flood a first start: a few days of periods, not years', () => {
    // A fresh database on the day the example was last dated: every period is derived.
    const firstStart = Date.parse('2026-12-03T14:00:00Z');
    const rollups = defineRollups(loadConfig({ path: 'config/example.yaml', env: {} }));
    const counts = Object.fromEntries(
      rollups.map(({ rollup: r }) => [
        r.id,
        combineCounts(r, r.begin, periodsEnd(r, firstStart, null), missedBefore(r, firstStart), {
          counts: {},
          beforeMissed: 0,
        }),
      ]),
    );
    expect(counts).toMatchObject({
      orders_hourly: { waiting: 63, missed: 0 },
      orders_daily: { waiting: 1, missed: 2 },
      clicks_compaction: { waiting: 0, missed: 0 },
    });
  });

  it.each([
    [{ http: { port: 'x' } }, 'http.port'],
    [{ queue: { concurrency: 0 } }, 'queue.concurrency'],
    [{ lease: { ttl: 'PT2S', renew_every: 'PT2S' } }, 'lease.renew_every: must be at most half of lease.ttl'],
    [{ lease: { ttl: 'fifteen seconds' } }, 'lease.ttl: expected an ISO 8601 duration'],
    [{ log_level: 'loud' }, 'log_level'],
    [{ unknown_key: 1 }, 'unknown_key: unknown key'],
    [{ assets: [{ name: 'a', zone: 'Mars/Olympus' }] }, 'assets[a].zone: expected an IANA time zone'],
    [
      { assets: [{ name: 'a', freshness: { max_lag: '20m' } }] },
      'assets[a].freshness.max_lag: expected an ISO 8601',
    ],
    [
      { assets: [{ name: 'a', freshness: { max_lag: 'PT0S' } }] },
      'assets[a].freshness.max_lag: expected a duration longer',
    ],
    [
      { assets: [{ name: 'a', freshness: { maxlag: 'PT5M' } }] },
      'assets[a].freshness.maxlag: unknown key; did you mean max_lag?',
    ],
    [{ retention: { events: 'PT0S' } }, 'retention.events: must be longer than zero'],
    [{ retention: { partition: 'PT1.5S' } }, 'retention.partition: must be a whole number of seconds'],
    [{ retention: { history: 'forever' } }, 'retention.history: expected an ISO 8601 duration'],
    [{ queue: { name: 'asset:events' } }, "queue.name: BullMQ refuses ':' in a queue name"],
    [{ queue: { dead_letter: 'dead:letters' } }, "queue.dead_letter: BullMQ refuses ':' in a queue name"],
    [
      {
        rollups: [
          {
            id: 'r',
            upstream: ['a'],
            every: 'hour',
            begin: '2026-01-01',
            target: { type: 'queue', queue: 'a:b' },
          },
        ],
      },
      "rollups[r].target.queue: BullMQ refuses ':' in a queue name",
    ],
  ])('refuses %j naming the field', (raw, message) => {
    expect(() => parseConfig(raw)).toThrow(ConfigError);
    expect(() => parseConfig(raw)).toThrow(message);
  });

  it('names a rollup by its id, repeats the bad value and suggests the nearest key', () => {
    const rollup = {
      id: 'orders_daily',
      upstream: ['a'],
      every: 'day',
      begin: '2025-06-01',
      target: { type: 'queue', queue: 'q' },
    };
    const errorOf = (raw: unknown) => {
      try {
        parseConfig(raw);
      } catch (error) {
        if (error instanceof ConfigError) return error.message;
      }
      throw new Error(`accepted ${JSON.stringify(raw)}`);
    };
    const { upstream: _, ...noUpstream } = rollup;
    expect(
      errorOf({ rollups: [{ ...noUpstream, upstrem: ['a'] }] })
        .split('\n')
        .slice(1),
    ).toEqual([
      '  rollups[orders_daily].upstream: required',
      '  rollups[orders_daily].upstrem: unknown key; did you mean upstream?',
    ]);
    expect(errorOf({ rollups: [{ ...rollup, timezone: 'Europe/Berln' }] })).toContain(
      'rollups[orders_daily].timezone: expected an IANA time zone such as UTC or Europe/Berlin (got "Europe/Berln")',
    );
    expect(errorOf({ rollups: [rollup, { ...rollup, id: 'b', polcy: {} }] })).toContain(
      'rollups[b].polcy: unknown key; did you mean policy?',
    );
    expect(errorOf({ rollups: [{ ...rollup, target: { type: 'queue', queu: 'q' } }] })).toContain(
      'rollups[orders_daily].target.queu: unknown key; did you mean queue?',
    );
    expect(errorOf({ databse_url: 'postgres://db/x' })).toContain(
      'databse_url: unknown key; did you mean database_url?',
    );
    // Nothing near: no guess.
    expect(errorOf({ rollups: [{ ...rollup, colour: 'red' }] })).toMatch(
      /rollups\[orders_daily\]\.colour: unknown key$/m,
    );
  });

  it('never repeats a value that may hold a credential', () => {
    const message = (raw: unknown) => {
      try {
        parseConfig(raw);
        return '';
      } catch (error) {
        return (error as Error).message;
      }
    };
    expect(message({ database_url: 'mysql://u:hunter2@db/x' })).not.toContain('hunter2');
    expect(message({ redis_url: 'http://u:hunter2@cache' })).not.toContain('hunter2');
    expect(message({ api_tokens: ['hunter2'] })).not.toContain('hunter2');
  });

  it('reads an asset freshness expectation as milliseconds', () => {
    const config = parseConfig({ assets: [{ name: 'a', freshness: { max_lag: 'PT20M' } }, { name: 'b' }] });
    expect([...maxLags(config)]).toEqual([['a', 1_200_000]]);
  });

  it('refuses a bad value from the environment, naming the variable', () => {
    expect(() => loadConfig({ env: { PORT: 'eighty' } })).toThrow(/http\.port \(from PORT\)/);
    expect(() => loadConfig({ env: { PORT: '-1' } })).toThrow(/http\.port \(from PORT\): Too small/);
    expect(() => loadConfig({ env: { DATABASE_URL: 'notaurl' } })).toThrow(
      'database_url (from DATABASE_URL): expected a postgres:// or postgresql:// URL',
    );
    expect(() => loadConfig({ env: { DATABASE_READ_URL: 'replica:5432' } })).toThrow(
      'database_read_url (from DATABASE_READ_URL): expected a postgres:// or postgresql:// URL',
    );
    expect(() => loadConfig({ env: { REDIS_URL: 'http://cache' } })).toThrow('redis_url (from REDIS_URL)');
    // Empty counts as unset (compose's PORT=${PORT}); several hosts are postgres.js's to parse.
    expect(loadConfig({ env: { PORT: '', API_TOKENS: '' } }).http.port).toBe(8080);
    expect(loadConfig({ env: { DATABASE_URL: 'postgres://u@db1:5432,db2:5432/app' } }).database_url).toBe(
      'postgres://u@db1:5432,db2:5432/app',
    );
  });

  it('reads LOG_LEVEL in any case', () => {
    expect(loadConfig({ env: { LOG_LEVEL: 'WARN' } }).log_level).toBe('warn');
  });

  it('refuses target URLs with credentials, which fetch would quote into logs', () => {
    const rollup = (target: Record<string, unknown>) => ({
      rollups: [{ id: 'r', upstream: ['a'], every: 'hour', begin: '2025-01-01', target }],
    });
    expect(() =>
      parseConfig(rollup({ type: 'webhook', url: 'https://user:secret@hooks.example/run' })),
    ).toThrow('rollups[r].target.url: credentials in the URL are refused');
    expect(() =>
      parseConfig(rollup({ type: 'airflow', url: 'http://admin:admin@airflow:8080', dag_id: 'd' })),
    ).toThrow('credentials in the URL are refused');
    expect(() => parseConfig(rollup({ type: 'webhook', url: 'ftp://files.example/run' }))).toThrow(
      'expected an http:// or https:// URL',
    );
    expect(() => parseConfig(rollup({ type: 'webhook', url: 'hooks.example/run' }))).toThrow(ConfigError);
    expect(parseConfig(rollup({ type: 'webhook', url: 'https://hooks.example/run' })).rollups).toHaveLength(
      1,
    );
  });

  it("reads a queue target's timeout, leaving it unset (and the stored definition unchanged) by default", () => {
    const target = (extra: Record<string, unknown>) =>
      parseConfig({
        rollups: [
          {
            id: 'r',
            upstream: ['a'],
            every: 'hour',
            begin: '2025-01-01',
            target: { type: 'queue', queue: 'q', ...extra },
          },
        ],
      }).rollups[0]!.target;
    expect(target({ timeout: 'PT3S' })).toEqual({ type: 'queue', queue: 'q', timeout: 3000 });
    expect(target({})).toEqual({ type: 'queue', queue: 'q' });
    expect(() => target({ timeout: 'soon' })).toThrow(ConfigError);
  });

  it('reports every error of a file at once, each naming its field', () => {
    const queue = { type: 'queue', queue: 'q' };
    const raw = {
      lease: { ttl: 'PT10S', renew_every: 'PT8S' },
      assets: [{ name: 'x', domain: 'integer' }, { name: 'x' }],
      rollups: [
        // A missing upstream must not hide the same rollup's or another's bad every.
        { id: 'a', every: 'fortnight', begin: '2025-06-01', target: queue },
        { id: 'a', upstream: ['x'], every: 'hour', begin: 'not-a-date', target: queue },
        { id: 'b', upstream: ['x'], every: 'fortnightly', begin: '2025-06-01', target: queue },
        { id: 'c', upstream: ['x'], every: 10, begin: 0, policy: { deadline: 'PT1H' }, target: queue },
        { id: 'd', upstream: ['y'], every: 'hour', begin: '2025-06-01', target: { type: 'webhook' } },
      ],
    };
    let message = '';
    try {
      parseConfig(raw, 'f.yaml');
    } catch (error) {
      message = (error as Error).message;
    }
    const lines = message.split('\n');
    expect(lines[0]).toBe('invalid configuration (f.yaml):');
    for (const field of [
      'rollups[a].upstream: required',
      'rollups[a].every: "fortnight" is neither',
      'rollups[a].begin: expected a date or date-time',
      'rollups[b].every: "fortnightly" is neither',
      'rollups[c].policy.deadline: a deadline needs a time rollup',
      'rollups[d].target.url: required',
      'lease.renew_every: must be at most half of lease.ttl',
      'rollups[a].id: duplicate id a',
      'assets[x].name: duplicate x',
    ])
      expect(
        lines.some((l) => l.startsWith(`  ${field}`)),
        field,
      ).toBe(true);
    expect(lines).toHaveLength(10);
  });

  it('reports every rollup it cannot build at once', () => {
    const rollup = { upstream: ['a'], target: { type: 'queue', queue: 'q' } };
    const config = parseConfig({
      rollups: [
        { ...rollup, id: 'i', every: 10, begin: 0, policy: { deadline: 'PT1H' } },
        { ...rollup, id: 'j', every: 10, begin: 0, repair: { target: { type: 'queue', queue: 'r' } } },
        { ...rollup, id: 'k', every: 'hour', begin: '2025-06-01' },
      ],
    });
    expect(() => defineRollups(config, 'f.yaml')).toThrow(
      'invalid configuration (f.yaml):\n  rollups[i].policy.deadline: a deadline needs a time rollup; integer periods have no end time\n  rollups[j].repair: ',
    );
  });

  it('refuses rollups it cannot build, naming the rollup and field', () => {
    const rollup = { id: 'r', upstream: ['a'], begin: '2025-01-01', target: { type: 'queue', queue: 'q' } };
    expect(() => defineRollups(parseConfig({ rollups: [{ ...rollup, every: 'fortnightly' }] }))).toThrow(
      'rollups[r].every: ',
    );
    expect(() =>
      defineRollups(
        parseConfig({ rollups: [{ ...rollup, every: 10, begin: 0, policy: { deadline: 'PT1H' } }] }),
      ),
    ).toThrow(/policy\.deadline/);
    expect(() => parseConfig({ rollups: [rollup, rollup].map((r) => ({ ...r, every: 'day' })) })).toThrow(
      /duplicate id r/,
    );
    expect(() => parseConfig({ rollups: [{ ...rollup, id: 'a:b', every: 'day' }] })).toThrow(
      'rollups[a:b].id: expected 1-100 letters',
    );
    expect(() =>
      parseConfig({ rollups: [{ ...rollup, every: 'day', policy: { on_deadline: 'miss' } }] }),
    ).toThrow('rollups[r].policy.on_deadline: on_deadline needs a deadline');
    const defaults = parseConfig({ rollups: [{ ...rollup, every: 'day' }] }).rollups[0]!.policy;
    expect(defaults).toMatchObject({ settle: 0, on_deadline: 'trigger' });
  });
});

describe('run.outcome', () => {
  const define = (target: Record<string, unknown>, run?: Record<string, unknown>) =>
    defineRollups(
      parseConfig({
        rollups: [
          { id: 'r', upstream: ['a'], every: 'hour', begin: '2025-01-01', target, ...(run ? { run } : {}) },
        ],
      }),
    )[0]!.rollup.run.outcome;
  const hook = { type: 'webhook', url: 'http://127.0.0.1:9/hook' };
  const queue = { type: 'queue', queue: 'q' };

  it('a webhook succeeds its runs on delivery unless the rollup waits for a callback; the others follow their target', () => {
    expect(define(hook)).toBe('delivery');
    expect(define(hook, { outcome: 'callback' })).toBe('callback');
    expect(define(hook, { outcome: 'delivery', retries: 0 })).toBe('delivery');
    expect(define(queue)).toBe('target');
    expect(define({ type: 'airflow', url: 'http://af:8080', dag_id: 'd', token: 't' })).toBe('target');
  });

  it('refuses an outcome the target cannot have, naming the rollup and the field', () => {
    expect(() => define(queue, { outcome: 'callback' })).toThrow(
      /rollups\[r\]\.run\.outcome: callback is for a target that cannot be asked how its runs went .* a queue target's runs end as the queue reports them/,
    );
    expect(() =>
      define({ type: 'airflow', url: 'http://af:8080', dag_id: 'd', token: 't' }, { outcome: 'delivery' }),
    ).toThrow('rollups[r].run.outcome: delivery is for a target');
    expect(() => define(hook, { outcome: 'target' })).toThrow(
      'rollups[r].run.outcome: a webhook target cannot be asked how its runs went',
    );
    expect(() => define(hook, { outcome: 'later' })).toThrow(/rollups\[r\]\.run\.outcome: .*"delivery"/);
  });

  it("config/quickstart.yaml: the README's quick start rollup waits for its consumer's callback", () => {
    const [quickstart] = defineRollups(loadConfig({ path: 'config/quickstart.yaml', env: {} }));
    expect(quickstart!.rollup.run.outcome).toBe('callback');
  });

  it('is left out of the definition unless written, so a stored definition (and its hash) does not change', () => {
    const config = parseConfig({
      rollups: [{ id: 'r', upstream: ['a'], every: 'hour', begin: '2025-01-01', target: hook }],
    });
    expect(config.rollups[0]!.run).toEqual({ retries: 2, backoff: 60_000, timeout: 6 * 3_600_000 });
  });
});

describe('rollup calendars', () => {
  const define = (fields: Record<string, unknown>) =>
    defineRollups(
      parseConfig({
        rollups: [{ id: 'r', upstream: ['a'], target: { type: 'queue', queue: 'q' }, ...fields }],
      }),
    )[0]!.rollup;

  it('align duration and integer periods to begin unless an origin is given', () => {
    const sevens = define({ every: 'PT7M', begin: '2026-12-02T16:00:00Z' });
    expect(sevens.begin).toBe(Date.parse('2026-12-02T16:00:00Z') * 1000);
    expect(sevens.calendar.periodContaining(sevens.begin).end).toBe(
      Date.parse('2026-12-02T16:07:00Z') * 1000,
    );
    const shifted = define({ every: 'PT7M', begin: '2026-12-02T16:00:00Z', origin: '2026-12-02T16:03:00Z' });
    expect(shifted.begin).toBe(Date.parse('2026-12-02T15:56:00Z') * 1000);
    const buckets = define({ every: 100, begin: 50 });
    expect(buckets.begin).toBe(50);
    expect(buckets.calendar.periodContaining(149)).toMatchObject({ start: 50, end: 150 });
    const weeks = define({ every: 'P1W', timezone: 'Europe/Berlin', begin: '2026-11-04' });
    expect(weeks.calendar.periodContaining(weeks.begin).key).toBe('2026-11-04T00:00');
  });

  it('align calendar units to themselves: begin falls inside the first period', () => {
    const days = define({ every: 'day', timezone: 'Europe/Berlin', begin: '2026-11-04T15:00:00' });
    expect(days.calendar.periodContaining(days.begin).key).toBe('2026-11-04');
  });
});

describe('the demo', () => {
  it('takes only where PostgreSQL and Redis are from the user config: it drops or triggers nothing real', () => {
    const demo = loadConfig({ path: 'config/demo.yaml', env: {} });
    const server = parseConfig({
      database_url: 'postgres://app:secret@db.internal:6543/production?sslmode=require&database=production',
      redis_url: 'redis://cache.internal:6380',
      queue: { prefix: 'prod', name: 'events' },
      rollups: [
        {
          id: 'real',
          upstream: ['a'],
          every: 'day',
          begin: '2025-01-01',
          policy: { deadline: 'PT1H' },
          target: { type: 'webhook', url: 'https://prod.example/run' },
        },
      ],
    });
    const config = demoConfig(demo, server);
    expect(config.database_url).toBe(
      'postgres://app:secret@db.internal:6543/coverage_rollup_demo?sslmode=require',
    );
    expect(config.redis_url).toBe('redis://cache.internal:6380');
    expect(config.queue).toMatchObject({ prefix: 'crdemo', name: demo.queue.name });
    expect(config.rollups.map((r) => r.id)).toEqual(demo.rollups.map((r) => r.id));
    expect(config.rollups.map((r) => r.id)).not.toContain('real');
  });

  it('gives each user a demo database and queue prefix of their own, and drops only demo databases', () => {
    expect(defaultDemoDatabase('alice')).toBe('coverage_rollup_demo_alice');
    expect(defaultDemoDatabase('Bob.Smith')).toBe('coverage_rollup_demo_bob_smith');
    expect(defaultDemoDatabase('')).toMatch(/^coverage_rollup_demo_run\d+$/);
    expect(defaultDemoDatabase('x'.repeat(100)).length).toBeLessThanOrEqual(63);
    const demo = loadConfig({ path: 'config/demo.yaml', env: {} });
    const server = parseConfig({ database_url: 'postgres://db.internal/app' });
    const alice = demoConfig(demo, server, 'coverage_rollup_demo_alice');
    expect(alice.database_url).toBe('postgres://db.internal/coverage_rollup_demo_alice');
    expect(alice.queue.prefix).toBe('crdemo_alice');
    expect(demoConfig(demo, server, 'coverage_rollup_demo_bob').queue.prefix).toBe('crdemo_bob');
    for (const ok of ['coverage_rollup_demo', 'coverage_rollup_demo_ci_42'])
      expect(isDemoDatabase(ok), ok).toBe(true);
    for (const bad of [
      'app',
      'postgres',
      'coverage_rollup',
      'coverage_rollup_demo; drop',
      'coverage_rollup_demo_X',
    ])
      expect(isDemoDatabase(bad), bad).toBe(false);
  });
});
