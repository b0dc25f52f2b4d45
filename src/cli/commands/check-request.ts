/**
 * `check`'s arguments as a request, checked before anything connects: the asset, the window as
 * given, the list limit and order, and --max-lag. Shared by the database and the HTTP paths.
 */
import { Duration } from 'luxon';
import { DEFAULT_LIMIT, type ListOrders, MAX_LIMIT } from '../../core/intervals/coverage-answer.js';

export interface CheckOptions {
  readonly start?: string | undefined;
  readonly end?: string | undefined;
  readonly limit?: string | undefined;
  readonly order?: string | undefined;
  readonly json?: boolean | undefined;
  readonly 'max-lag'?: string | undefined;
  readonly 'require-known'?: boolean | undefined;
}

export interface CheckRequest {
  readonly name: string;
  readonly start: string;
  readonly end: string;
  readonly limit: number;
  readonly orders: ListOrders | undefined;
  readonly maxLagMs: number | undefined;
}

const USAGE =
  'usage: coverage-rollup check ASSET --start S --end E [--limit N] [--order oldest|newest] [--max-lag D] [--require-known] [--json]';
/** Ranges printed without --json; the JSON answer is bounded like HTTP's (200). */
const TEXT_LIMIT = 20;

/** The request, or the exit code after saying what is wrong (2). */
export function checkRequest(args: readonly string[], values: CheckOptions): CheckRequest | number {
  const [name] = args;
  if (!name || args.length > 1 || values.start === undefined || values.end === undefined) {
    const missing = !name
      ? 'the asset'
      : args.length > 1
        ? undefined
        : [values.start === undefined ? '--start' : '', values.end === undefined ? '--end' : '']
            .filter(Boolean)
            .join(' and ');
    const what = missing
      ? `coverage-rollup check: give ${missing}\n`
      : `coverage-rollup check: one asset at a time (got ${args.length})\n`;
    process.stderr.write(`${what}${USAGE}\n`);
    return 2;
  }
  const fail = checkFailed;
  const limit =
    values.limit === undefined ? (values.json ? DEFAULT_LIMIT : TEXT_LIMIT) : Number(values.limit);
  if (!/^\d+$/.test(values.limit ?? '0') || limit > MAX_LIMIT)
    return fail(`--limit must be an integer from 0 to ${MAX_LIMIT}`);
  let orders: ListOrders | undefined;
  if (values.order !== undefined) {
    if (values.order !== 'oldest' && values.order !== 'newest')
      return fail('--order must be oldest or newest');
    orders = { ranges: values.order, batches: values.order };
  }
  let maxLagMs: number | undefined;
  if (values['max-lag'] !== undefined) {
    const d = Duration.fromISO(values['max-lag']);
    if (!d.isValid || d.toMillis() <= 0)
      return fail(
        `--max-lag must be an ISO 8601 duration longer than zero, such as PT20M (got ${values['max-lag']})`,
      );
    maxLagMs = d.toMillis();
  }
  return { name, start: values.start, end: values.end, limit, orders, maxLagMs };
}

/** An error of the check itself (a bad window, an unknown asset with --require-known): exit 2. */
export function checkFailed(message: string): number {
  process.stderr.write(`coverage-rollup check: ${message}\n`);
  return 2;
}
