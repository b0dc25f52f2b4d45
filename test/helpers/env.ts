import { appendFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { expect } from 'vitest';

/** Where the test suite finds PostgreSQL and Redis; override for other machines. */
export const ADMIN_URL = process.env.TEST_ADMIN_URL ?? 'postgres://127.0.0.1:5432/postgres';
export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/**
 * One id per test run, in every database and Redis prefix name the run makes, so the global
 * teardown can list what this run (and no other run on the same server) left behind. The global
 * setup sets it first, in the main process; the test workers inherit it through the environment.
 */
process.env.CR_TEST_RUN ??= `r${Math.random().toString(36).slice(2, 8)}`;
export const RUN_ID: string = process.env.CR_TEST_RUN;

export function databaseUrl(name: string): string {
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * Every name uniqueName gave out in this run, with the test file it was made for (one
 * `name<TAB>file` line each), so the global teardown can say which file left a database or a
 * queue prefix behind. Appends of one short line are atomic, so the workers share the file.
 */
export function namesFile(runId: string = RUN_ID): string {
  return join(tmpdir(), `coverage-rollup-test-names-${runId}.tsv`);
}

export function uniqueName(prefix: string): string {
  const name = `${prefix}_${RUN_ID}_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
  try {
    appendFileSync(namesFile(), `${name}\t${testFile()}\n`);
  } catch {
    // The teardown then names the leftover without its file.
  }
  return name;
}

/** The test file running here (relative to the working directory), or 'global setup'. */
function testFile(): string {
  let path: string | undefined;
  try {
    path = expect.getState().testPath;
  } catch {
    path = undefined;
  }
  return path ? relative(process.cwd(), path) : 'global setup';
}

/**
 * The queue backend this run of a suite uses: `redis` unless TEST_QUEUE_BACKEND says `postgres`
 * (the files under test/integration/pg-queue/ run the queue-touching suites again with it).
 */
export function testQueueBackend(): 'redis' | 'postgres' {
  return process.env.TEST_QUEUE_BACKEND === 'postgres' ? 'postgres' : 'redis';
}

/** A raw config with this run's queue backend, unless the config names one itself. */
export function withTestBackend<T extends Record<string, unknown>>(raw: T): T {
  const queue = (raw.queue ?? {}) as Record<string, unknown>;
  return { ...raw, queue: { backend: testQueueBackend(), ...queue } };
}
