import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { packageRoot } from '../../src/support/paths.js';
import { startTestDaemon, TEST_TOKEN, testConfig, testProducer } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { REDIS_URL } from '../helpers/env.js';
import { freePort } from '../helpers/ports.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

/**
 * The consumers in examples/ run as a user would run them (`node examples/...`), against a daemon
 * of this file: each fails attempt 1 (FAIL_ATTEMPTS=1), so the run is seen failing, retried by the
 * rollup's run policy, and succeeding on attempt 2, from the job's outcome (queue) or the callback
 * POST /v1/runs (webhook).
 */

const hookPort = await freePort();
const db = await createTestDatabase();
const prefix = createTestPrefix();
const hourly = (id: string, target: Record<string, unknown>) => ({
  id,
  upstream: [`ex.${id}`],
  every: 'hour',
  timezone: 'UTC',
  begin: '2026-11-02',
  run: {
    retries: 2,
    backoff: 'PT0.2S',
    timeout: 'PT1M',
    ...(target.type === 'webhook' ? { outcome: 'callback' } : {}),
  },
  target,
});
const config = testConfig(db, prefix, {
  rollups: [
    // The example reports its outcome: its rollup waits for that callback.
    hourly('via_hook', { type: 'webhook', url: `http://127.0.0.1:${hookPort}/run` }),
    hourly('via_queue', { type: 'queue', queue: 'example-runs' }),
  ],
});
const daemon = await startTestDaemon(config);
const producer = testProducer(config);

/** The example as a child process, its output kept for a failure message; ended after its test. */
function example(file: string, env: Record<string, string>): { child: ChildProcess; output: string[] } {
  const output: string[] = [];
  const child = spawn(process.execPath, [join(packageRoot(), 'examples', file)], {
    cwd: packageRoot(),
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  // Called inside a test: ended when that test finishes (an afterAll there would never run).
  onTestFinished(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  });
  return { child, output };
}

interface RunJson {
  attempt: number;
  state: string;
  error: string | null;
  version?: string | null;
}
const periodOf = async (rollup: string, key: string) => {
  const response = await fetch(`${daemon.url}/v1/rollups/${rollup}/periods/${key}`);
  return (await response.json()) as { period: { run: RunJson | null }; runs: RunJson[] };
};
/** Attempts as `attempt state error version`, oldest first. */
const history = (runs: RunJson[]) =>
  runs.map((r) => `${r.attempt} ${r.state} ${r.error ?? '-'} ${r.version ?? '-'}`).reverse();
const metric = async (line: string) => {
  const body = await (await fetch(`${daemon.url}/metrics`)).text();
  return Number(
    body
      .split('\n')
      .find((l) => l.startsWith(`${line} `))
      ?.split(' ')
      .at(-1),
  );
};

const coverHour = (rollup: string) =>
  producer.add('e', {
    asset: `ex.${rollup}`,
    start: '2026-11-02T10:00:00Z',
    end: '2026-11-02T11:00:00Z',
    version: 'v1',
  });

describe('the example consumers', () => {
  it('webhook_consumer.mjs answers the trigger and reports each attempt through POST /v1/runs', async () => {
    // No COVERAGE_ROLLUP_URL: it reports to the daemon of the record in its data directory, as
    // beside the quick start's daemon (whatever port that one took).
    const dataDir = mkdtempSync(join(tmpdir(), 'coverage-rollup-consumer-'));
    afterAll(() => rmSync(dataDir, { recursive: true, force: true }));
    writeFileSync(join(dataDir, 'daemon.json'), JSON.stringify({ pid: process.pid, url: daemon.url }));
    const consumer = example('webhook_consumer.mjs', {
      PORT: String(hookPort),
      COVERAGE_ROLLUP_URL: '',
      COVERAGE_ROLLUP_DATA_DIR: dataDir,
      API_TOKEN: TEST_TOKEN,
      WORK_MS: '20',
      FAIL_ATTEMPTS: '1',
      JOB_VERSION: 'v7',
    });
    await waitFor(() => consumer.output.some((l) => l.includes('listening')), { what: 'the consumer' });
    expect(consumer.output.join('')).toContain(
      `webhook consumer listening on 127.0.0.1:${hookPort}, reporting to the daemon recorded in ${dataDir}/daemon.json`,
    );
    await coverHour('via_hook');
    const period = await waitFor(
      async () => {
        const p = await periodOf('via_hook', '2026-11-02T10');
        return p.period.run?.state === 'succeeded' ? p : undefined;
      },
      { what: `run succeeded\n${consumer.output.join('')}` },
    );
    expect(period.period.run).toMatchObject({ attempt: 2, state: 'succeeded' });
    expect(history(period.runs)).toEqual(['1 failed simulated failure of attempt 1 -', '2 succeeded - v7']);
    expect(consumer.output.join('')).toContain('reported failed');
    expect(await metric('coverage_rollup_runs_total{target="webhook",state="failed"}')).toBe(1);
    expect(await metric('coverage_rollup_runs_total{target="webhook",state="succeeded"}')).toBe(1);
    expect(await metric('coverage_rollup_runs_given_up_total{target="webhook",state="failed"}')).toBe(0);
  });

  it('downstream_worker.mjs: the BullMQ job failing, then completing, is the run failing, then succeeding', async () => {
    const worker = example('downstream_worker.mjs', {
      REDIS_URL,
      QUEUE: 'example-runs',
      PREFIX: prefix,
      FAIL_ATTEMPTS: '1',
    });
    await coverHour('via_queue');
    const period = await waitFor(
      async () => {
        const p = await periodOf('via_queue', '2026-11-02T10');
        return p.period.run?.state === 'succeeded' ? p : undefined;
      },
      { what: `run succeeded\n${worker.output.join('')}` },
    );
    expect(period.period.run).toMatchObject({ attempt: 2, state: 'succeeded' });
    expect(history(period.runs)).toEqual(['1 failed simulated failure of attempt 1 -', '2 succeeded - -']);
    expect(worker.output.join('')).toContain('simulated failure of attempt 1');
    expect(await metric('coverage_rollup_runs_total{target="queue",state="failed"}')).toBe(1);
    expect(await metric('coverage_rollup_runs_total{target="queue",state="succeeded"}')).toBe(1);
  });
});
