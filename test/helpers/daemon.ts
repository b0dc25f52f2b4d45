import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Queue } from 'bullmq';
import { afterAll } from 'vitest';
import { type Config, parseConfig } from '../../src/config/index.js';
import { type Daemon, type DaemonOptions, startDaemon } from '../../src/daemon/daemon.js';
import { queueConnection } from '../../src/queue/backend.js';
import { createLogger } from '../../src/support/log.js';
import { atFileEnd } from './cleanup.js';
import type { TestDatabase } from './db.js';
import { REDIS_URL, withTestBackend } from './env.js';

export const TEST_TOKEN = 'test-token-0123456789abcdef';

/** A config for one test file: its own database and queue prefix, an ephemeral HTTP port. */
export function testConfig(
  db: TestDatabase,
  prefix: string,
  overrides: Record<string, unknown> = {},
): Config {
  return parseConfig(testConfigInput(db, prefix, overrides));
}

/** testConfig as written in a file, before parsing. */
export function testConfigInput(
  db: TestDatabase,
  prefix: string,
  overrides: Record<string, unknown> = {},
): Record<string, unknown> {
  return withTestBackend({
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

/** Writes a config (as JSON) to a file of its own, removed after the test file; its path. */
export function writeTestConfig(raw: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), 'cr-config-'));
  atFileEnd(async () => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'config.json');
  writeFileSync(path, JSON.stringify(raw));
  return path;
}

/**
 * Starts a daemon in this process, stopped after the file, wherever it is called. vitest drops an
 * afterAll registered from a test or a hook: such a daemon ran on until its database was dropped
 * WITH (FORCE) under it. Called at module level, the afterAll stops it in the file's hook order
 * (before the file's earlier hooks close what it uses); the file-end cleanup, which runs after
 * every hook and before the database is dropped, stops the others. Once either way.
 */
export async function startTestDaemon(config: Config, options: DaemonOptions = {}): Promise<Daemon> {
  const daemon = await startDaemon(config, createLogger(config.log_level), undefined, options);
  let stopped: Promise<void> | undefined;
  const stop = () => {
    stopped ??= daemon.stop();
    return stopped;
  };
  afterAll(stop);
  atFileEnd(stop);
  return daemon;
}

/** A producer on the events queue of `config`, closed after the file. */
export function testProducer(config: Config): Queue {
  return testQueue(config.queue.name, config.queue.prefix, config);
}

/**
 * A queue handle for reading what a queue target received: on `config`'s backend (its database
 * for PostgreSQL), else on the test Redis. Closed after the file, wherever it is called (before
 * the database it may live in is dropped).
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
  atFileEnd(async () => {
    await queue.close();
    await connection.close();
  });
  return queue;
}
