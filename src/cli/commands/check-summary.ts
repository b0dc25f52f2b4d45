/**
 * `check`'s answer for people (a summary line, freshness, and the first missing and
 * replay-required ranges) or as JSON, and its exit code: shared by the database and HTTP paths.
 */
import { type CoverageAnswer, MAX_LIMIT } from '../../core/intervals/coverage-answer.js';
import { formatLength } from '../../http/status/draw/format.js';
import { formatRatio, plural } from '../format.js';
import { type CheckOptions, type CheckRequest, checkFailed } from './check-request.js';

export type Span = CoverageAnswer['missing'][number];

/** An asset the index does not know: exit 2 under --require-known, else 1, "not covered". */
export function unknownAsset(name: string, values: CheckOptions): number {
  if (values['require-known'])
    return checkFailed(`no asset named ${name} is known (never seen, nor declared with a domain in config)`);
  if (values.json) process.stdout.write(`${JSON.stringify({ asset: name, covered: false, known: false })}\n`);
  else process.stdout.write(`${name}: not covered (no event for this asset has been ingested yet)\n`);
  return 1;
}

/**
 * Prints `answer` (JSON, or the summary) and says when it is stale against --max-lag; returns the
 * exit code. The summary names the first and the last missing range wherever the list stops:
 * `endOf` asks for the one range at that end when the list does not hold it.
 */
export async function printAnswer(
  answer: CoverageAnswer,
  request: Pick<CheckRequest, 'name' | 'orders' | 'maxLagMs'>,
  json: boolean | undefined,
  endOf: (order: 'oldest' | 'newest') => Promise<Span | undefined>,
): Promise<number> {
  const stale = request.maxLagMs !== undefined && answer.stale === true;
  if (json) process.stdout.write(`${JSON.stringify(answer)}\n`);
  else {
    const newest = request.orders?.ranges === 'newest';
    const all = answer.missing.length === answer.missing_count;
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
        newest && answer.missing[0] ? answer.missing[0] : all ? answer.missing.at(-1) : await endOf('newest');
    }
    process.stdout.write(`${describe(answer, first, last).join('\n')}\n`);
  }
  if (stale)
    process.stderr.write(`coverage-rollup check: ${request.name} is stale: ${answer.stale_reason}\n`);
  return answer.covered && !stale ? 0 : 1;
}

export function describe(a: CoverageAnswer, first: Span | undefined, last: Span | undefined): string[] {
  const unit = a.domain === 'time' ? 's' : 'values';
  let summary = `${a.asset} [${a.start}, ${a.end}): ${a.covered ? 'covered' : 'NOT covered'}, ratio ${formatRatio(a.ratio)}`;
  summary += `; ${plural(a.missing_count, 'missing range')} (${a.missing_total} ${unit})`;
  // One missing range is named once: "first X, last X" read as if there were two.
  if (first && last)
    summary +=
      a.missing_count === 1
        ? `, ${first.start} .. ${first.end}`
        : `, first ${first.start} .. ${first.end}, last ${last.start} .. ${last.end}`;
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
