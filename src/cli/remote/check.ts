/**
 * `check` against a daemon's API: GET /v1/assets/{asset}/coverage, printed as the database path
 * prints it. The daemon parses the window in the asset's domain and zone and applies its own
 * freshness expectation; --max-lag is judged here, from the answer's freshness facts.
 */
import { parseBound } from '../../core/intervals/bounds.js';
import type { CoverageAnswer } from '../../core/intervals/coverage-answer.js';
import { freshnessOf } from '../../core/intervals/freshness.js';
import {
  type CheckOptions,
  type CheckRequest,
  checkFailed,
  checkRequest,
} from '../commands/check-request.js';
import { printAnswer, unknownAsset } from '../commands/check-summary.js';
import type { DaemonLink, LinkFinder } from '../daemon-link.js';
import { ApiError, call } from '../http-client.js';

export async function checkOverHttp(
  args: readonly string[],
  values: CheckOptions,
  findLink: LinkFinder,
): Promise<number> {
  const request = checkRequest(args, values);
  if (typeof request === 'number') return request;
  const link = findLink();
  const { name } = request;
  let answer: CoverageAnswer;
  try {
    answer = await coverage(link, request, request.limit, request.orders?.ranges);
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    if (error.code !== 'unknown_asset') return checkFailed(error.message);
    return unknownAsset(name, values);
  }
  // An empty window is covered by definition: refuse it, or a templating bug passes every check.
  if (answer.start === answer.end)
    return checkFailed(`the window is empty (--start equals --end: ${request.start}); nothing to check`);
  if (request.maxLagMs !== undefined) answer = withMaxLag(answer, request.maxLagMs);
  return printAnswer(
    answer,
    request,
    values.json,
    async (order) => (await coverage(link, request, 1, order)).missing[0],
  );
}

async function coverage(
  link: DaemonLink,
  request: CheckRequest,
  limit: number,
  order: 'oldest' | 'newest' | undefined,
): Promise<CoverageAnswer> {
  const query = new URLSearchParams({ start: request.start, end: request.end, limit: String(limit) });
  if (order !== undefined) query.set('order', order);
  const path = `/v1/assets/${encodeURIComponent(request.name)}/coverage?${query}`;
  return (await call<CoverageAnswer>(link, 'GET', path)).body;
}

/** The answer's freshness judged against --max-lag instead of the daemon's configured expectation. */
function withMaxLag(answer: CoverageAnswer, maxLagMs: number): CoverageAnswer {
  const coveredUntil =
    answer.covered_until === null
      ? null
      : parseBound(String(answer.covered_until), answer.domain, 'covered_until', 'UTC').value;
  const lastEventAt = answer.last_event_at === null ? null : Date.parse(answer.last_event_at);
  return {
    ...answer,
    ...freshnessOf({ domain: answer.domain, coveredUntil, lastEventAt, maxLagMs }, Date.now()),
  };
}
