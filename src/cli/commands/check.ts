import { Duration } from 'luxon';
import { maxLags } from '../../config/index.js';
import { BadInputError } from '../../core/errors.js';
import { domainOf, parseBound } from '../../core/intervals/bounds.js';
import {
  type CoverageAnswer,
  DEFAULT_LIMIT,
  type ListOrders,
  MAX_LIMIT,
  toCoverageAnswer,
} from '../../core/intervals/coverage-answer.js';
import type { Domain, Interval } from '../../core/types.js';
import { formatLength } from '../../http/status/draw/format.js';
import { findAsset } from '../../store/assets/assets.js';
import { queryCoverage } from '../../store/assets/coverage-query.js';
import { formatRatio, plural } from '../format.js';
import { commandConfig, type GlobalOptions, withSql } from './shared.js';

interface CheckOptions extends GlobalOptions {
  readonly start?: string | undefined;
  readonly end?: string | undefined;
  readonly limit?: string | undefined;
  readonly order?: string | undefined;
  readonly json?: boolean | undefined;
  readonly 'max-lag'?: string | undefined;
  readonly 'require-known'?: boolean | undefined;
}

const USAGE =
  'usage: coverage-rollup check ASSET --start S --end E [--limit N] [--order oldest|newest] [--max-lag D] [--require-known] [--json]';
/** Ranges printed without --json; the JSON answer is bounded like HTTP's (200). */
const TEXT_LIMIT = 20;

/**
 * A sensor: exit 0 when [start, end) is covered (and, with --max-lag, the asset is fresh), 1 when
 * not or when the asset was never seen, 2 on error: a bad or empty window, or with
 * --require-known an asset the index does not know.
 */
export async function runCheck(args: string[], values: CheckOptions): Promise<number> {
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
  const fail = (message: string) => {
    process.stderr.write(`coverage-rollup check: ${message}\n`);
    return 2;
  };
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
  const config = await commandConfig(values);
  return withSql(config, async (sql) => {
    const asset = await findAsset(sql, name);
    const domain = asset?.domain ?? guessDomain(values.start!, values.end!);
    let window: Interval;
    try {
      window = parseWindow(values.start!, values.end!, domain, asset?.zone ?? 'UTC');
    } catch (error) {
      if (!(error instanceof BadInputError)) throw error;
      return fail(error.message);
    }
    // An empty window is covered by definition: refuse it, or a templating bug passes every check.
    if (window.end === window.start)
      return fail(`the window is empty (--start equals --end: ${values.start}); nothing to check`);
    if (!asset) {
      if (values['require-known'])
        return fail(`no asset named ${name} is known (never seen, nor declared with a domain in config)`);
      if (values.json)
        process.stdout.write(`${JSON.stringify({ asset: name, covered: false, known: false })}\n`);
      else process.stdout.write(`${name}: not covered (no event for this asset has been ingested yet)\n`);
      return 1;
    }
    const lag = maxLagMs ?? maxLags(config).get(name);
    const now = Date.now();
    const answerOf = async (request: { limit: number; orders?: ListOrders | undefined }) => {
      const coverage = await queryCoverage(sql, asset, { window, ...request });
      return toCoverageAnswer(
        { asset: asset.name, domain: asset.domain, window, coverage, ...coverage, maxLagMs: lag },
        now,
      );
    };
    const answer = await answerOf({ limit, orders });
    const stale = maxLagMs !== undefined && answer.stale === true;
    if (values.json) process.stdout.write(`${JSON.stringify(answer)}\n`);
    else {
      // The summary names the first and the last missing range, wherever the list stops.
      const newest = orders?.ranges === 'newest';
      const all = answer.missing.length === answer.missing_count;
      const endOf = async (order: 'oldest' | 'newest') =>
        (await answerOf({ limit: 1, orders: { ranges: order, batches: order } })).missing[0];
      let first: Span | undefined;
      let last: Span | undefined;
      if (answer.missing_count > 0) {
        first =
          !newest && answer.missing[0]
            ? answer.missing[0]
            : all
              ? answer.missing.at(-1)
              : await endOf('oldest');
        last =
          newest && answer.missing[0]
            ? answer.missing[0]
            : all
              ? answer.missing.at(-1)
              : await endOf('newest');
      }
      process.stdout.write(`${describe(answer, first, last).join('\n')}\n`);
    }
    if (stale) process.stderr.write(`coverage-rollup check: ${name} is stale: ${answer.stale_reason}\n`);
    return answer.covered && !stale ? 0 : 1;
  });
}

function parseWindow(start: string, end: string, domain: Domain, zone: string): Interval {
  const s = parseBound(start, domain, 'start', zone);
  const e = parseBound(end, domain, 'end', zone);
  if (e.value < s.value) throw new BadInputError('end_before_start', '--end is before --start');
  return { start: s.value, end: e.value };
}

/** For an asset the index does not know: the domain its bounds are written in. */
function guessDomain(start: string, end: string): Domain {
  return domainOf(start) ?? domainOf(end) ?? 'time';
}

type Span = CoverageAnswer['missing'][number];

function describe(a: CoverageAnswer, first: Span | undefined, last: Span | undefined): string[] {
  const unit = a.domain === 'time' ? 's' : 'values';
  let summary = `${a.asset} [${a.start}, ${a.end}): ${a.covered ? 'covered' : 'NOT covered'}, ratio ${formatRatio(a.ratio)}`;
  summary += `; ${plural(a.missing_count, 'missing range')} (${a.missing_total} ${unit})`;
  if (first && last) summary += `, first ${first.start} .. ${first.end}, last ${last.start} .. ${last.end}`;
  summary += `; ${plural(a.replay_required_count, 'replay-required range')}`;
  const lines = [summary];
  if (a.covered_until !== null) {
    // status's units (2h 5m, not 7500 s); --json keeps lag_seconds exact.
    const lag = a.lag_seconds === null ? '' : `, lag ${formatLength('time', a.lag_seconds * 1_000_000)}`;
    lines.push(`covered until ${a.covered_until}${lag}; last event at ${a.last_event_at ?? 'never'}`);
  }
  const more = (shown: number, total: number) =>
    total > shown
      ? [`  ... ${total - shown} more (--limit N prints up to ${MAX_LIMIT}; --order newest)`]
      : [];
  if (a.missing.length > 0)
    lines.push(
      'missing:',
      ...a.missing.map((m) => `  ${m.start} .. ${m.end}`),
      ...more(a.missing.length, a.missing_count),
    );
  if (a.replay_required.length > 0) {
    lines.push(
      'replay required:',
      ...a.replay_required.map(
        (r) => `  ${r.start} .. ${r.end} (at ${r.version ?? 'no version'}, needs ${r.required_version})`,
      ),
      ...more(a.replay_required.length, a.replay_required_count),
    );
  }
  return lines;
}
