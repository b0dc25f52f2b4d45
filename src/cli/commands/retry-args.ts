/**
 * `retry`'s arguments (one rollup, and --period KEY or --failed with a window) and its output,
 * shared by the database and the HTTP paths.
 */
import { plural } from '../format.js';

export interface RetryOptions {
  readonly period?: string | undefined;
  readonly failed?: boolean | undefined;
  readonly start?: string | undefined;
  readonly end?: string | undefined;
  readonly json?: boolean | undefined;
}

/** Periods retried by one `--failed` call at most; run it again for more. */
export const MAX_RETRIES = 10_000;

/** Says what is wrong, with the usage; returns the exit code (2). */
export const retryUsage = (why: string) => {
  process.stderr.write(
    `coverage-rollup retry: ${why}\nusage: coverage-rollup retry ROLLUP (--period KEY | --failed --start S --end E)\n`,
  );
  return 2;
};

/** The rollup's id, or the exit code after saying what is wrong (2). */
export function retryArgs(args: readonly string[], values: RetryOptions): string | number {
  const [id, ...extra] = args;
  if (id === undefined || extra.length > 0) return retryUsage('name one rollup');
  if ((values.period === undefined) === (values.failed !== true))
    return retryUsage('give --period KEY or --failed');
  if (values.failed && (values.start === undefined || values.end === undefined))
    return retryUsage('--failed needs --start and --end');
  return id;
}

export type RetryResult =
  | { readonly period: string; readonly run_id: string; readonly attempt: number }
  | { readonly period: string; readonly refused: string };

/** Prints each period's result (or them all as JSON); returns the exit code. */
export function printRetried(id: string, results: readonly RetryResult[], values: RetryOptions): number {
  const retried = results.filter((r) => 'run_id' in r);
  if (values.json) process.stdout.write(`${JSON.stringify({ rollup: id, retried: results })}\n`);
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
  return values.period !== undefined && retried.length === 0 ? 1 : 0;
}
