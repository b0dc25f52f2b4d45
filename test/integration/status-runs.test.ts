/**
 * Runs on the status page: failed, timed-out and lost runs first on the overview with
 * their error, attempt and next step; failed counts on rollup rows and card headlines; the period
 * page's run history and what happens next. Runs move through reportRun, the one verb every
 * outcome path (queue, Airflow, callback, timeout) goes through.
 */
import { describe, expect, it } from 'vitest';
import type { RunReport } from '../../src/core/runs/runs.js';
import { type RunRef, reportRun } from '../../src/store/runs/report.js';
import { startTestDaemon, testConfig, testProducer } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const HOSTILE = '<b>disk full</b> & "quoted"';
const db = await createTestDatabase();
const prefix = createTestPrefix();
const target = { type: 'queue', queue: 'status-runs' };
const hourly = (id: string, run: Record<string, unknown>) => ({
  id,
  upstream: [`sr.${id}`],
  every: 'hour',
  timezone: 'UTC',
  begin: '2026-11-02',
  run,
  target,
});
const NO_RETRY = { retries: 0, backoff: 'PT1M', timeout: 'PT6H' };
const ONE_RETRY = { retries: 1, backoff: 'PT1H', timeout: 'PT6H' };
const config = testConfig(db, prefix, {
  rollups: [
    hourly('runs_a', NO_RETRY),
    hourly('runs_b', ONE_RETRY),
    hourly('runs_ok', NO_RETRY),
    // Idle rollups: past 12, the unfocused page is the overview of one row per rollup.
    ...Array.from({ length: 11 }, (_, i) => hourly(`idle_${String(i).padStart(2, '0')}`, NO_RETRY)),
  ],
});
const daemon = await startTestDaemon(config);
const producer = testProducer(config);

const hour = (h: number) => `2026-11-02T${String(h).padStart(2, '0')}:00:00Z`;
await producer.addBulk(
  [
    ['runs_a', 10],
    ['runs_a', 11],
    ['runs_b', 10],
    ['runs_ok', 10],
  ].map(([id, h]) => ({
    name: 'e',
    data: { asset: `sr.${id}`, start: hour(h as number), end: hour((h as number) + 1) },
  })),
);
// Each run delivered (started) before the outcomes below are reported.
await waitFor(
  async () => {
    const [row] = await db.sql<{ n: number }[]>`select count(*)::int as n from runs where state = 'started'`;
    return row!.n === 4;
  },
  { what: 'four runs started', timeout: 60_000 },
);

const ref = (rollupId: string, h: number): RunRef => ({
  rollupId,
  lo: Date.parse(hour(h)) * 1000,
  generation: 1,
  attempt: 1,
});
const report = async (r: RunRef, what: RunReport, retries: number) => {
  const policy = { retries, backoffMs: 3_600_000, timeoutMs: 6 * 3_600_000, outcome: 'target' as const };
  const result = await db.sql.begin((tx) =>
    reportRun(tx, r, what, 'queue', policy, { record: 'all', rollup: null }),
  );
  expect(result?.effect).toBe('applied');
};
await report(ref('runs_a', 10), { kind: 'target', state: 'failed', error: HOSTILE }, 0);
await report(ref('runs_a', 11), { kind: 'target', state: 'lost' }, 0);
await report(ref('runs_b', 10), { kind: 'timeout' }, 1);
await report(ref('runs_ok', 10), { kind: 'target', state: 'running' }, 0);
await report(ref('runs_ok', 10), { kind: 'target', state: 'succeeded', version: 'v9' }, 0);

const page = async (path: string) => {
  const response = await daemon.http.inject({ url: path });
  expect(response.statusCode).toBe(200);
  return response.body;
};
/** The failed runs table's rows, in order: rollup, key and state. */
const failedRows = (body: string) =>
  [...body.matchAll(/<tr data-rollup="([^"]+)" data-key="([^"]+)" data-run-state="([^"]+)">/g)].map((m) =>
    m.slice(1).join(' '),
  );

describe('runs on the status page', () => {
  it('opens the overview with failed, timed-out and lost runs, their error, attempt and next step', async () => {
    const body = await page('/');
    const table = body.indexOf('<h2 id="failed-runs">');
    expect(table).toBeGreaterThan(0);
    expect(table).toBeLessThan(body.indexOf('<h2>Assets'));
    expect(body).toContain('3 periods whose run failed, timed out or was lost');
    expect(failedRows(body).sort()).toEqual([
      'runs_a 2026-11-02T10 failed',
      'runs_a 2026-11-02T11 lost',
      'runs_b 2026-11-02T10 timed_out',
    ]);
    // The error is escaped, never markup; the attempt and generation are shown.
    expect(body).toContain('&lt;b&gt;disk full&lt;/b&gt; &amp; &quot;quoted&quot;');
    expect(body).not.toContain('<b>disk full</b>');
    expect(body).toMatch(/data-key="2026-11-02T10" data-run-state="failed">.*?#1 attempt 1/);
    // A run that will be retried says when; one with no retry left says a hand is needed.
    expect(body).toMatch(
      /data-rollup="runs_b" data-key="2026-11-02T10" data-run-state="timed_out">.*?retry in (59m|1h)/,
    );
    expect(body).toMatch(
      /data-rollup="runs_a" data-key="2026-11-02T11" data-run-state="lost">.*?no retry left/,
    );
    expect(body).toContain('<span class="run-badge r-timed_out" data-run-state="timed_out">timed out</span>');
    expect(body).not.toContain('data-rollup="runs_ok" data-key');
  });

  it('ranks rollups by failed runs first and counts them on each row and card', async () => {
    const body = await page('/');
    const rows = [...body.matchAll(/<tr data-rollup="(\w+)">/g)].map((m) => m[1]);
    expect(rows.slice(0, 2)).toEqual(['runs_a', 'runs_b']);
    expect(body).toMatch(
      /<a href="\/\?rollup=runs_a">runs_a<\/a><\/td><td>file<\/td><td>hour<\/td><td class="num">1<\/td><td class="num"><span class="bad">2<\/span>/,
    );
    const card = await page('/?rollup=runs_a');
    expect(card).toContain('<span class="bad" data-count="failed_runs">2 failed runs</span>');
    // On the strip, a triggered hour whose run failed is drawn apart; a succeeded one stays triggered.
    const strip = await page('/?rollup=runs_a&start=2026-11-02T00:00:00Z&end=2026-11-03T00:00:00Z');
    expect(strip).toMatch(/data-state="run_failed"[^>]*data-key="2026-11-02T10"/);
    expect(strip).toMatch(/data-state="run_failed"[^>]*data-key="2026-11-02T11"/);
    expect(strip).toContain('run failed (attempt 1)');
    const okStrip = await page('/?rollup=runs_ok&start=2026-11-02T00:00:00Z&end=2026-11-03T00:00:00Z');
    expect(okStrip).toMatch(/data-state="triggered"[^>]*data-key="2026-11-02T10"/);
    expect(okStrip).toContain('run succeeded (attempt 1)');
    const fine = await page('/?rollup=runs_ok');
    expect(fine).not.toContain('data-count="failed_runs"');
    expect(fine).not.toContain('<h2 id="failed-runs">');
  });

  it('explains the run history on the period page, attempt by attempt, with what happens next', async () => {
    const failed = await page('/rollups/runs_a/periods/2026-11-02T10');
    expect(failed).toContain('<h3>Run history</h3>');
    expect(failed).toMatch(/<tr data-generation="1" data-attempt="1" data-run-state="failed">/);
    expect(failed).toContain('&lt;b&gt;disk full&lt;/b&gt;');
    expect(failed).toContain('Run attempt 1 of generation 1 has failed');
    expect(failed).toContain('No retry is left');
    expect(failed).toContain('<code>coverage-rollup retry runs_a --period 2026-11-02T10</code>');

    const retried = await page('/rollups/runs_b/periods/2026-11-02T10');
    expect(retried).toContain('has timed out');
    expect(retried).toMatch(/<li class="warn" data-next-retry="[^"]+">Attempt 2 will be made .*?in (59m|1h)/);

    const ok = await page('/rollups/runs_ok/periods/2026-11-02T10');
    expect(ok).toMatch(/<tr data-generation="1" data-attempt="1" data-run-state="succeeded">/);
    expect(ok).toContain('version v9');
    // Its reports: delivered (scheduler), running and succeeded (queue), in order.
    expect(ok).toMatch(
      /<details class="reports"><summary>\d+ reports<\/summary>.*queue: running.*queue: succeeded/s,
    );
    expect(ok).not.toContain('No retry is left');

    const untouched = await page('/rollups/runs_a/periods/2026-11-02T05');
    expect(untouched).toContain('No run yet: the period has not been triggered.');
  });
});
