/**
 * bench:reload: a daemon (in this process) with BENCH_ROLLUPS (default 1,000) rollups in its config
 * file over 100 upstreams, each with stored periods. Measures a reload that changes nothing, one
 * that changes one rollup's policy, one that changes one rollup's calendar, a PUT of a new API
 * rollup, its dry_run and a PUT that changes it: the HTTP answer's time, the time until the
 * scheduler recorded the change (its `rollups` row), and what was touched: `rollups` rows
 * rewritten and periods of the other rollups changed (both should be the one rollup, and 0).
 * Prints JSON.
 *
 *   npm run bench:reload            (BENCH_ROLLUPS=100 for a quick run)
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config/index.js';
import { defineRollups } from '../src/config/rollups.js';
import { startDaemon } from '../src/daemon/daemon.js';
import { createBenchDatabase, dropPrefix, log, median, REDIS_URL, round, uniqueName } from './common.js';

const ROLLUPS = Number(process.env.BENCH_ROLLUPS ?? 1000);
const ASSETS = 100;
const REPEATS = 5;
const TOKEN = 'bench-token-0123456789abcdef';

async function main(): Promise<void> {
  const db = await createBenchDatabase();
  const dir = mkdtempSync(join(tmpdir(), 'crbench-reload-'));
  const file = join(dir, 'config.json');
  const rollup = (i: number, extra: Record<string, unknown> = {}) => ({
    id: `r${i}`,
    upstream: [`a${i % ASSETS}`],
    every: 'hour',
    begin: '2026-11-01',
    target: { type: 'queue', queue: 'bench-runs' },
    ...extra,
  });
  const prefix = uniqueName('crbench');
  const write = (changes: Record<number, Record<string, unknown>> = {}) =>
    writeFileSync(
      file,
      JSON.stringify({
        database_url: db.url,
        redis_url: REDIS_URL,
        queue: { prefix },
        log_level: 'silent',
        http: { host: '127.0.0.1', port: 0 },
        api_tokens: [TOKEN],
        rollups: Array.from({ length: ROLLUPS }, (_, i) => rollup(i, changes[i])),
      }),
    );
  write();
  const config = loadConfig({ path: file });
  const daemon = await startDaemon(config, log, defineRollups(config), { configFile: { path: file } });
  const call = async (method: string, path: string, body?: unknown) => {
    const started = performance.now();
    const response = await fetch(`${daemon.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${TOKEN}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const answer = await response.json();
    if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(answer)}`);
    return { ms: performance.now() - started, answer };
  };
  const until = async (check: () => Promise<boolean>, what: string) => {
    const deadline = Date.now() + 120_000;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  try {
    // Every rollup recorded and given a stored (waiting) period: half an hour of each upstream.
    await until(
      async () => (await db.sql`select 1 from rollups`).length === ROLLUPS,
      'every rollup recorded by the lease holder',
    );
    const events = Array.from({ length: ASSETS }, (_, a) => ({
      asset: `a${a}`,
      start: '2026-11-02T10:00:00Z',
      end: '2026-11-02T10:30:00Z',
    }));
    await call('POST', '/v1/events', events);
    await until(
      async () => (await db.sql`select 1 from periods where ratio > 0`).length === ROLLUPS,
      'a stored period per rollup, evaluated',
    );
    const snapshot = async () => {
      const rows = await db.sql<{ id: string; at: Date }[]>`select id, updated_at as at from rollups`;
      const periods = await db.sql<{ id: string; lo: string; at: Date; dirty: boolean }[]>`
        select rollup_id as id, lo::text as lo, updated_at as at, dirty from periods`;
      return {
        rollups: new Map(rows.map((r) => [r.id, r.at.getTime()])),
        periods: new Map(periods.map((p) => [`${p.id}@${p.lo}`, `${p.at.getTime()}|${p.dirty}`])),
      };
    };
    const touched = (before: Awaited<ReturnType<typeof snapshot>>, after: typeof before, id: string) => ({
      rollup_rows_rewritten: [...after.rollups].filter(([k, at]) => before.rollups.get(k) !== at).length,
      other_rollups_periods_changed: [
        ...[...after.periods].filter(([k, v]) => !k.startsWith(`${id}@`) && before.periods.get(k) !== v),
        ...[...before.periods.keys()].filter((k) => !k.startsWith(`${id}@`) && !after.periods.has(k)),
      ].length,
    });
    // The scheduler has evaluated every period a change marked: the next measurement starts clean.
    const settled = () =>
      until(
        async () => (await db.sql`select 1 from periods where dirty limit 1`).length === 0,
        'nothing dirty',
      );
    const recorded = (id: string, since: number | undefined) => async () => {
      const [row] = await db.sql<{ at: Date }[]>`select updated_at as at from rollups where id = ${id}`;
      return row !== undefined && row.at.getTime() !== since;
    };

    const noop: number[] = [];
    for (let i = 0; i < REPEATS; i++) noop.push((await call('POST', '/v1/admin/reload')).ms);

    const measureReload = async (index: number, change: Record<string, unknown>) => {
      const id = `r${index}`;
      const before = await snapshot();
      write({ [index]: change });
      const started = performance.now();
      const { ms, answer } = await call('POST', '/v1/admin/reload');
      await until(recorded(id, before.rollups.get(id)), `${id} recorded`);
      const appliedMs = performance.now() - started;
      await settled();
      const after = await snapshot();
      write();
      await call('POST', '/v1/admin/reload'); // back as it was
      await until(recorded(id, after.rollups.get(id)), `${id} recorded again`);
      await settled();
      return {
        http_ms: round(ms, 1),
        applied_ms: round(appliedMs, 1),
        answer: (answer as { rollups: unknown }).rollups,
        ...touched(before, after, id),
      };
    };
    const policy = await measureReload(7, { policy: { settle: 'PT5M' } });
    const calendar = await measureReload(8, { every: 'day' });

    const apiRollup = {
      upstream: ['a1'],
      every: 'hour',
      begin: '2026-11-01',
      target: { type: 'queue', queue: 'bench-runs' },
    };
    const dryRun: number[] = [];
    for (let i = 0; i < REPEATS; i++)
      dryRun.push((await call('PUT', '/v1/rollups/api0?dry_run=true', apiRollup)).ms);
    const beforePut = await snapshot();
    const started = performance.now();
    const put = await call('PUT', '/v1/rollups/api0', apiRollup);
    await until(recorded('api0', undefined), 'api0 recorded');
    const putApplied = performance.now() - started;
    await settled();
    const afterPut = await snapshot();
    const changeStarted = performance.now();
    const changed = await call('PUT', '/v1/rollups/api0', { ...apiRollup, policy: { settle: 'PT1M' } });
    await until(recorded('api0', afterPut.rollups.get('api0')), 'api0 recorded again');
    const changeApplied = performance.now() - changeStarted;
    await settled();
    const afterChange = await snapshot();

    process.stdout.write(
      `${JSON.stringify(
        {
          bench: 'reload',
          rollups: ROLLUPS,
          upstreams: ASSETS,
          stored_periods: beforePut.periods.size,
          load_average_1m: round(loadavg()[0]!, 1),
          reload_unchanged_ms_median: round(median(noop), 1),
          reload_one_policy_changed: policy,
          reload_one_calendar_changed: calendar,
          put_dry_run_ms_median: round(median(dryRun), 1),
          put_new_api_rollup: {
            http_ms: round(put.ms, 1),
            applied_ms: round(putApplied, 1),
            ...touched(beforePut, afterPut, 'api0'),
          },
          put_changed_api_rollup: {
            http_ms: round(changed.ms, 1),
            applied_ms: round(changeApplied, 1),
            ...touched(afterPut, afterChange, 'api0'),
          },
        },
        null,
        2,
      )}\n`,
    );
  } finally {
    await daemon.stop();
    await db.drop();
    await dropPrefix(prefix);
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
