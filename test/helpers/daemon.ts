import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll } from 'vitest';
import { type Config, parseConfig } from '../../src/config.js';
import { type Daemon, startDaemon } from '../../src/daemon.js';
import { createLogger } from '../../src/log.js';
import type { TestDatabase } from './db.js';
import { REDIS_URL } from './env.js';

export const TEST_TOKEN = 'test-token-0123456789abcdef';

/** A config for one test file: its own database and queue prefix, an ephemeral HTTP port. */
export function testConfig(
  db: TestDatabase,
  prefix: string,
  overrides: Record<string, unknown> = {},
): Config {
  return parseConfig({
    database_url: db.url,
    redis_url: REDIS_URL,
    log_level: process.env.TEST_LOG_LEVEL ?? 'silent',
    http: { host: '127.0.0.1', port: 0 },
    api_tokens: [TEST_TOKEN],
    queue: { prefix, batch_wait: 'PT0.002S' },
    lease: { ttl: 'PT2S', renew_every: 'PT0.5S', retry_every: 'PT0.2S' },
    shutdown_timeout: 'PT10S',
    ...overrides,
  });
}

/** Starts a daemon in this process, stopped after the file. */
export async function startTestDaemon(config: Config): Promise<Daemon> {
  const daemon = await startDaemon(config, createLogger(config.log_level));
  afterAll(() => daemon.stop());
  return daemon;
}

/** A producer on the events queue of `config`, closed after the file. */
export function testProducer(config: Config): Queue {
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const queue = new Queue(config.queue.name, { connection, prefix: config.queue.prefix });
  afterAll(async () => {
    await queue.close();
    connection.disconnect();
  });
  return queue;
}

/** A queue handle for reading what a queue target received. */
export function testQueue(name: string, prefix: string): Queue {
  const connection = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const queue = new Queue(name, { connection, prefix });
  afterAll(async () => {
    await queue.close();
    connection.disconnect();
  });
  return queue;
}
