import type { Queue } from 'bullmq';
import { afterAll } from 'vitest';
import { type Config, parseConfig } from '../../src/config/index.js';
import { type Daemon, startDaemon } from '../../src/daemon/daemon.js';
import { queueConnection } from '../../src/queue/backend.js';
import { createLogger } from '../../src/support/log.js';
import type { TestDatabase } from './db.js';
import { REDIS_URL, withTestBackend } from './env.js';

export const TEST_TOKEN = 'test-token-0123456789abcdef';

/** A config for one test file: its own database and queue prefix, an ephemeral HTTP port. */
export function testConfig(
  db: TestDatabase,
  prefix: string,
  overrides: Record<string, unknown> = {},
): Config {
  return parseConfig(
    withTestBackend({
      database_url: db.url,
      redis_url: REDIS_URL,
      log_level: process.env.TEST_LOG_LEVEL ?? 'silent',
      http: { host: '127.0.0.1', port: 0 },
      api_tokens: [TEST_TOKEN],
      queue: { prefix, batch_wait: 'PT0.002S' },
      lease: { ttl: 'PT2S', renew_every: 'PT0.5S', retry_every: 'PT0.2S' },
      shutdown_timeout: 'PT10S',
      ...overrides,
    }),
  );
}

/** Starts a daemon in this process, stopped after the file. */
export async function startTestDaemon(config: Config): Promise<Daemon> {
  const daemon = await startDaemon(config, createLogger(config.log_level));
  afterAll(() => daemon.stop());
  return daemon;
}

/** A producer on the events queue of `config`, closed after the file. */
export function testProducer(config: Config): Queue {
  return testQueue(config.queue.name, config.queue.prefix, config);
}

/**
 * A queue handle for reading what a queue target received: on `config`'s backend (its database
 * for PostgreSQL), else on the test Redis. Closed after the file.
 */
export function testQueue(
  name: string,
  prefix: string,
  config: Pick<Config, 'database_url' | 'redis_url' | 'queue'> = {
    database_url: 'postgres://unused',
    redis_url: REDIS_URL,
    queue: { backend: 'redis' } as Config['queue'],
  },
): Queue {
  const connection = queueConnection(config);
  const queue = connection.queue(name, prefix);
  afterAll(async () => {
    await queue.close();
    await connection.close();
  });
  return queue;
}
