import { parseBound } from '../../core/bounds.js';
import { toCoverageAnswer } from '../../core/coverage-answer.js';
import { BadInputError } from '../../core/errors.js';
import { findAsset } from '../../index/assets.js';
import { queryCoverage } from '../../index/coverage-query.js';
import { configFrom, type GlobalOptions, withSql } from './shared.js';

interface CheckOptions extends GlobalOptions {
  readonly start?: string | undefined;
  readonly end?: string | undefined;
  readonly limit?: string | undefined;
  readonly json?: boolean | undefined;
}

const USAGE = 'usage: coverage-rollup check ASSET --start S --end E [--limit N] [--json]';

/** A sensor: exit 0 when [start, end) is covered, 1 when not (or the asset is unseen), 2 on error. */
export async function runCheck(args: string[], values: CheckOptions): Promise<number> {
  const [name] = args;
  if (!name || args.length > 1 || values.start === undefined || values.end === undefined) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const limit = values.limit === undefined ? 200 : Number(values.limit);
  if (!Number.isInteger(limit) || limit < 0 || limit > 1000) {
    process.stderr.write('--limit must be an integer from 0 to 1000\n');
    return 2;
  }
  const config = configFrom(values);
  return withSql(config, async (sql) => {
    const asset = await findAsset(sql, name);
    if (!asset) {
      if (values.json)
        process.stdout.write(`${JSON.stringify({ asset: name, covered: false, known: false })}\n`);
      else process.stdout.write(`${name}: not covered (no event for this asset has been ingested yet)\n`);
      return 1;
    }
    let window: { start: number; end: number };
    try {
      const start = parseBound(values.start, asset.domain, 'start', asset.zone);
      const end = parseBound(values.end, asset.domain, 'end', asset.zone);
      if (end.value < start.value) throw new BadInputError('end_before_start', '--end is before --start');
      window = { start: start.value, end: end.value };
    } catch (error) {
      if (!(error instanceof BadInputError)) throw error;
      process.stderr.write(`coverage-rollup check: ${error.message}\n`);
      return 2;
    }
    const answer = toCoverageAnswer(
      asset.name,
      asset.domain,
      window,
      await queryCoverage(sql, asset, window, limit),
    );
    if (values.json) {
      process.stdout.write(`${JSON.stringify(answer)}\n`);
    } else {
      const lines = [
        `${answer.asset} [${answer.start}, ${answer.end}): ${answer.covered ? 'covered' : 'NOT covered'}, ratio ${answer.ratio}`,
      ];
      if (answer.missing.length > 0)
        lines.push('missing:', ...answer.missing.map((m) => `  ${m.start} .. ${m.end}`));
      if (answer.replay_required.length > 0) {
        lines.push(
          'replay required:',
          ...answer.replay_required.map(
            (r) => `  ${r.start} .. ${r.end} (at ${r.version ?? 'no version'}, needs ${r.required_version})`,
          ),
        );
      }
      process.stdout.write(`${lines.join('\n')}\n`);
    }
    return answer.covered ? 0 : 1;
  });
}
