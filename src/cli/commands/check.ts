import { maxLags } from '../../config/index.js';
import { BadInputError } from '../../core/errors.js';
import { domainOf, parseBound } from '../../core/intervals/bounds.js';
import { type ListOrders, toCoverageAnswer } from '../../core/intervals/coverage-answer.js';
import type { Domain, Interval } from '../../core/types.js';
import { findAsset } from '../../store/assets/assets.js';
import { queryCoverage } from '../../store/assets/coverage-query.js';
import { type CheckOptions as CheckRequestOptions, checkFailed, checkRequest } from './check-request.js';
import { printAnswer, unknownAsset } from './check-summary.js';
import { commandConfig, type GlobalOptions, withSql } from './shared.js';

interface CheckOptions extends GlobalOptions, CheckRequestOptions {}

/**
 * A sensor: exit 0 when [start, end) is covered (and, with --max-lag, the asset is fresh), 1 when
 * not or when the asset was never seen, 2 on error: a bad or empty window, or with
 * --require-known an asset the index does not know.
 */
export async function runCheck(args: string[], values: CheckOptions): Promise<number> {
  const request = checkRequest(args, values);
  if (typeof request === 'number') return request;
  const { name, limit, orders, maxLagMs } = request;
  const fail = checkFailed;
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
    if (!asset) return unknownAsset(name, values);
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
    return printAnswer(
      answer,
      request,
      values.json,
      async (order) => (await answerOf({ limit: 1, orders: { ranges: order, batches: order } })).missing[0],
    );
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
