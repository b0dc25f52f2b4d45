import { describe, expect, it } from 'vitest';
import { CONFIG_ENV_VARS, loadConfig, parseConfig } from '../../src/config/index.js';
import { consumedQueueSchemas, queueSchema } from '../../src/queue/schema.js';

describe('the defaults that follow from what is set', () => {
  it('neither URL: the embedded database in ./.coverage-rollup, queues on PostgreSQL', () => {
    const config = parseConfig({});
    expect(config.database_url).toBe('embedded');
    expect(config.data_dir).toBe('./.coverage-rollup');
    expect(config.queue.backend).toBe('postgres');
  });

  it('a Redis URL only: the local PostgreSQL, queues on Redis', () => {
    const config = parseConfig({ redis_url: 'redis://r:1' });
    expect(config.database_url).toBe('postgres://127.0.0.1:5432/coverage_rollup');
    expect(config.queue.backend).toBe('redis');
  });

  it('a database URL only: queues in that database', () => {
    const config = parseConfig({ database_url: 'postgres://db/x' });
    expect(config.database_url).toBe('postgres://db/x');
    expect(config.queue.backend).toBe('postgres');
  });

  it('queue.backend set wins over what the URLs suggest', () => {
    expect(parseConfig({ redis_url: 'redis://r:1', queue: { backend: 'postgres' } }).queue.backend).toBe(
      'postgres',
    );
    expect(parseConfig({ queue: { backend: 'redis' } }).queue.backend).toBe('redis');
  });

  it('QUEUE_BACKEND and COVERAGE_ROLLUP_DATA_DIR override the file, and are config variables', () => {
    const config = loadConfig({
      env: { REDIS_URL: 'redis://r:1', QUEUE_BACKEND: 'Postgres', COVERAGE_ROLLUP_DATA_DIR: '/var/lib/cr' },
    });
    expect(config.queue.backend).toBe('postgres');
    expect(config.data_dir).toBe('/var/lib/cr');
    expect(CONFIG_ENV_VARS).toEqual(expect.arrayContaining(['QUEUE_BACKEND', 'COVERAGE_ROLLUP_DATA_DIR']));
    expect(() => loadConfig({ env: { QUEUE_BACKEND: 'kafka' } })).toThrow(
      'queue.backend (from QUEUE_BACKEND)',
    );
  });

  it('refuses Redis Cluster with the PostgreSQL backend, saying what to set', () => {
    expect(() =>
      parseConfig({
        database_url: 'postgres://db/x',
        redis_url: 'redis://a:1,redis://b:1',
        queue: { backend: 'postgres', prefix: '{p}' },
      }),
    ).toThrow('Redis Cluster (several comma-separated redis_url seeds) works only with queue.backend: redis');
    expect(
      parseConfig({ redis_url: 'redis://a:1,redis://b:1', queue: { prefix: '{p}' } }).queue.backend,
    ).toBe('redis');
  });
});

describe('queueSchema: a queue prefix as a PostgreSQL schema', () => {
  it('keeps a prefix that is a plain identifier', () => {
    expect(queueSchema('bull')).toBe('bull');
    expect(queueSchema('crtest_123_ab')).toBe('crtest_123_ab');
  });

  it('spells other prefixes as identifiers, a hash keeping alike spellings apart', () => {
    const a = queueSchema('{coverage-rollup-0}');
    const b = queueSchema('{coverage-rollup-1}');
    const c = queueSchema('_coverage_rollup_0_');
    expect(a).toMatch(/^_coverage_rollup_0__[0-9a-f]{8}$/);
    expect(new Set([a, b, c, queueSchema('-coverage-rollup-0-')]).size).toBe(4);
    for (const prefix of ['9lives', 'x'.repeat(80), 'a.b:c', 'é']) {
      expect(queueSchema(prefix)).toMatch(/^[A-Za-z_][A-Za-z0-9_]{0,62}$/);
    }
  });

  it('names the schemas the daemon maintains: its consumed groups on PostgreSQL, none on Redis', () => {
    const queue = { prefix: 'cr', groups: 3, consume: [2, 0] };
    expect(consumedQueueSchemas(parseConfig({ database_url: 'postgres://db', queue }))).toEqual([
      queueSchema('{cr-2}'),
      queueSchema('{cr-0}'),
    ]);
    expect(
      consumedQueueSchemas(parseConfig({ database_url: 'postgres://db', queue: { prefix: 'cr' } })),
    ).toEqual(['cr']);
    expect(consumedQueueSchemas(parseConfig({ redis_url: 'redis://r', queue }))).toEqual([]);
  });
});
