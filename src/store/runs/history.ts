/**
 * Runs as the API shows them: a period's current run, its history with reports, one run
 * by its key, and the run a callback names.
 */
import type { ReportEffect, RunState } from '../../core/runs.js';
import type { Db } from '../pg/db.js';
import { type RefRow, type ReportSource, type RunRef, refOf } from './report.js';

/** The run a callback names: by the trigger's idempotency key and the attempt. */
export async function runByKey(db: Db, idempotencyKey: string, attempt: number): Promise<RunRef | null> {
  const [row] = await db<RefRow[]>`
    select r.rollup_id, r.period_lo, r.generation, r.attempt
    from triggers t join runs r using (rollup_id, period_lo, generation)
    where t.idempotency_key = ${idempotencyKey} and r.attempt = ${attempt}`;
  return row ? refOf(row) : null;
}

/** A run as the API shows it (with its documented field names). */
export interface RunView {
  readonly generation: number;
  readonly attempt: number;
  readonly run_id: string;
  readonly state: RunState;
  readonly cause: 'trigger' | 'retry' | 'manual';
  readonly error: string | null;
  readonly version: string | null;
  readonly created_at: string;
  readonly started_at: string | null;
  readonly finished_at: string | null;
  readonly next_retry_at: string | null;
  readonly timeout_at: string | null;
  readonly deliveries: number;
}

interface RunRow {
  generation: number;
  attempt: number;
  run_id: string;
  state: RunState;
  cause: 'trigger' | 'retry' | 'manual';
  error: string | null;
  version: string | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  next_retry_at: Date | null;
  timeout_at: Date | null;
  deliveries: number;
}

const iso = (d: Date | null) => d?.toISOString() ?? null;
export const runView = (r: RunRow): RunView => ({
  generation: r.generation,
  attempt: r.attempt,
  run_id: r.run_id,
  state: r.state,
  cause: r.cause,
  error: r.error,
  version: r.version,
  created_at: r.created_at.toISOString(),
  started_at: iso(r.started_at),
  finished_at: iso(r.finished_at),
  next_retry_at: iso(r.next_retry_at),
  timeout_at: iso(r.timeout_at),
  deliveries: r.deliveries,
});

/** The current run of each of these stored periods (their generation's newest attempt), by start. */
export async function currentRuns(
  db: Db,
  rollupId: string,
  los: readonly number[],
): Promise<Map<number, RunView>> {
  if (los.length === 0) return new Map();
  const rows = await db<(RunRow & { lo: number })[]>`
    select r.period_lo as lo, r.generation, r.attempt, r.run_id, r.state, r.cause, r.error, r.version,
      r.created_at, r.started_at, r.finished_at, r.next_retry_at, r.timeout_at, r.deliveries
    from periods p join runs r on r.rollup_id = p.rollup_id and r.period_lo = p.lo
      and r.generation = p.generation and r.attempt = p.run_attempt
    where p.rollup_id = ${rollupId} and p.lo = any(${los as number[]}::int8[])`;
  return new Map(rows.map((r) => [r.lo, runView(r)]));
}

export interface RunReportView {
  readonly at: string;
  readonly source: ReportSource;
  readonly state: string;
  readonly effect: ReportEffect;
  readonly error: string | null;
  readonly version: string | null;
}

/** A period's runs, newest first (at most `limit`), each with its reports in order (at most 50). */
export async function periodRuns(
  db: Db,
  rollupId: string,
  lo: number,
  limit: number,
): Promise<Array<RunView & { reports: RunReportView[] }>> {
  const runs = await db<RunRow[]>`
    select generation, attempt, run_id, state, cause, error, version, created_at, started_at, finished_at,
      next_retry_at, timeout_at, deliveries
    from runs where rollup_id = ${rollupId} and period_lo = ${lo}
    order by generation desc, attempt desc limit ${limit}`;
  if (runs.length === 0) return [];
  const reports = await db<
    {
      generation: number;
      attempt: number;
      at: Date;
      source: ReportSource;
      state: string;
      effect: ReportEffect;
      error: string | null;
      version: string | null;
    }[]
  >`
    select generation, attempt, at, source, state, effect, error, version from (
      select *, row_number() over (partition by generation, attempt order by id desc) as n
      from run_reports where rollup_id = ${rollupId} and period_lo = ${lo}
        and (generation, attempt) >= (${runs.at(-1)!.generation}, ${runs.at(-1)!.attempt})
    ) r where n <= 50 order by id`;
  return runs.map((r) => ({
    ...runView(r),
    reports: reports
      .filter((p) => p.generation === r.generation && p.attempt === r.attempt)
      .map((p) => ({
        at: p.at.toISOString(),
        source: p.source,
        state: p.state,
        effect: p.effect,
        error: p.error,
        version: p.version,
      })),
  }));
}

/** One run by its key. */
export async function runAt(db: Db, ref: RunRef): Promise<RunView | null> {
  const [row] = await db<RunRow[]>`
    select generation, attempt, run_id, state, cause, error, version, created_at, started_at, finished_at,
      next_retry_at, timeout_at, deliveries
    from runs where rollup_id = ${ref.rollupId} and period_lo = ${ref.lo} and generation = ${ref.generation}
      and attempt = ${ref.attempt}`;
  return row ? runView(row) : null;
}
