/**
 * `coverage-rollup retry ROLLUP (--period KEY | --failed --start S --end E)`: a manual retry
 * of one period's run, or of every period in a window whose run failed, timed out or was
 * lost. Each is a new attempt of the period's generation, delivered by the lease holder at once.
 */
import { defineRollups } from '../../config/rollups.js';
import { parseBound } from '../../core/intervals/bounds.js';
import { periodOfKey } from '../../core/periods/periods.js';
import { retryablePeriods } from '../../store/runs/periods-by-run-state.js';
import { retryPeriodRun } from '../../store/runs/retry.js';
import {
  MAX_RETRIES,
  printRetried,
  type RetryOptions as RetryArgs,
  type RetryResult,
  retryArgs,
  retryUsage as usage,
} from './retry-args.js';
import { configFrom, type GlobalOptions, withSql } from './shared.js';

interface RetryOptions extends GlobalOptions, RetryArgs {}

export async function runRetry(args: readonly string[], values: RetryOptions): Promise<number> {
  const id = retryArgs(args, values);
  if (typeof id === 'number') return id;
  const config = configFrom(values);
  const runtime = defineRollups(config).find((r) => r.rollup.id === id);
  if (!runtime) return usage(`no rollup ${id} is configured`);
  const { rollup } = runtime;
  const zone = rollup.calendar.timezone ?? 'UTC';
  let starts: number[] | null = null;
  let from = 0;
  let to = 0;
  if (values.period !== undefined) {
    const period = periodOfKey(rollup, values.period);
    if (period === null || period.start < rollup.begin) return usage(`${id} has no period ${values.period}`);
    starts = [period.start];
  } else {
    try {
      from = rollup.calendar.periodContaining(
        parseBound(values.start!, rollup.domain, 'start', zone).value,
      ).start;
      to = parseBound(values.end!, rollup.domain, 'end', zone).value;
    } catch (error) {
      return usage((error as Error).message);
    }
    if (to <= from) return usage('--end must be after --start');
  }
  return withSql(config, async (sql) => {
    const los = starts ?? (await retryablePeriods(sql, rollup.id, from, to, MAX_RETRIES));
    const results: RetryResult[] = [];
    for (const lo of los) {
      const result = await retryPeriodRun(sql, rollup.id, lo);
      const key = rollup.calendar.periodContaining(lo).key;
      results.push(
        result.ok
          ? { period: key, run_id: result.runId, attempt: result.run.attempt }
          : { period: key, refused: result.reason },
      );
    }
    return printRetried(rollup.id, results, values);
  });
}
