/** `check`'s answer for people: a summary line, freshness, and the first missing and replay-required ranges. */
import { type CoverageAnswer, MAX_LIMIT } from '../../core/intervals/coverage-answer.js';
import { formatLength } from '../../http/status/draw/format.js';
import { formatRatio, plural } from '../format.js';

export type Span = CoverageAnswer['missing'][number];

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
