/**
 * `coverage-rollup retry ROLLUP (--period KEY | --failed --start S --end E)`: a manual retry
 * of one period's run, or of every period in a window whose run failed, timed out or was
 * lost. Each is a new attempt of the period's generation, delivered by the lease holder at once.
 */
import { defineRollups } from '../../config/rollups.js';
import { parseBound } from '../../core/bounds.js';
import { periodOfKey } from '../../core/periods.js';
import { retryablePeriods } from '../../store/runs/periods-by-run-state.js';
import { retryPeriodRun } from '../../store/runs/retry.js';
import { plural } from '../format.js';
import { configFrom, type GlobalOptions, withSql } from './shared.js';

interface RetryOptions extends GlobalOptions {
  readonly period?: string | undefined;
  readonly failed?: boolean | undefined;
  readonly start?: string | undefined;
  readonly end?: string | undefined;
  readonly json?: boolean | undefined;
}

/** Periods retried by one `--failed` call at most; run it again for more. */
const MAX_RETRIES = 10_000;

const usage = (why: string) => {
  process.stderr.write(
    `coverage-rollup retry: ${why}\nusage: coverage-rollup retry ROLLUP (--period KEY | --failed --start S --end E)\n`,
  );
  return 2;
};

export async function runRetry(args: readonly string[], values: RetryOptions): Promise<number> {
  const [id, ...extra] = args;
  if (id === undefined || extra.length > 0) return usage('name one rollup');
  if ((values.period === undefined) === (values.failed !== true))
    return usage('give --period KEY or --failed');
  if (values.failed && (values.start === undefined || values.end === undefined))
    return usage('--failed needs --start and --end');
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
    const results = [];
    for (const lo of los) {
      const result = await retryPeriodRun(sql, rollup.id, lo);
      const key = rollup.calendar.periodContaining(lo).key;
      results.push(
        result.ok
          ? { period: key, run_id: result.runId, attempt: result.run.attempt }
          : { period: key, refused: result.reason },
      );
    }
    const retried = results.filter((r) => 'run_id' in r);
    if (values.json) process.stdout.write(`${JSON.stringify({ rollup: rollup.id, retried: results })}\n`);
    else {
      for (const r of results)
        process.stdout.write(
          'run_id' in r
            ? `${r.period}: attempt ${r.attempt} (${r.run_id}) pending\n`
            : `${r.period}: not retried: ${r.refused}\n`,
        );
      process.stdout.write(`${plural(retried.length, 'period')} retried\n`);
    }
    // One period asked for by name and refused is an error; an empty window is not.
    return starts !== null && retried.length === 0 ? 1 : 0;
  });
}
