/**
 * `repair`'s arguments (the asset, the window, --target as YAML or JSON) and its output, shared by
 * the database and the HTTP paths.
 */
import { createRequire } from 'node:module';
import type { RepairAnswer, RepairAsk } from '../../http/repair-request.js';

export interface RepairOptions {
  readonly start?: string | undefined;
  readonly end?: string | undefined;
  readonly target?: string | undefined;
  readonly json?: boolean | undefined;
}

const usage = (why: string) => {
  process.stderr.write(
    `coverage-rollup repair: ${why}\nusage: coverage-rollup repair ASSET --start S --end E [--target T] [--json]\n`,
  );
  return 2;
};

/** The request asked for, or the exit code after saying what is wrong (2). */
export function repairArgs(
  args: readonly string[],
  values: RepairOptions,
): { ask: RepairAsk; usage: (why: string) => number } | number {
  const [asset, ...extra] = args;
  if (asset === undefined || extra.length > 0) return usage('name one asset');
  if (values.start === undefined || values.end === undefined) return usage('give --start and --end');
  let target: unknown;
  if (values.target !== undefined) {
    try {
      // Loaded only for --target: YAML is the config's language (JSON is YAML too).
      target = (createRequire(import.meta.url)('yaml') as typeof import('yaml')).parse(values.target);
    } catch (error) {
      return usage(`--target is not YAML or JSON: ${(error as Error).message}`);
    }
  }
  return {
    ask: { asset, start: values.start, end: values.end, ...(target === undefined ? {} : { target }) },
    usage,
  };
}

/** Prints what was requested (or why nothing was); exit 0 either way. */
export function printRepair(answer: RepairAnswer, ask: RepairAsk, json: boolean): number {
  if (json) {
    process.stdout.write(`${JSON.stringify(answer)}\n`);
    return 0;
  }
  const { asset } = ask;
  if (answer.cut_at !== undefined)
    process.stdout.write(`${asset}: the window ends in the future; asking up to now, ${answer.cut_at}\n`);
  if (answer.covered)
    process.stdout.write(
      `${asset}: [${ask.start}, ${answer.cut_at ?? ask.end}) is covered; nothing to request\n`,
    );
  else if (answer.requested === null)
    process.stdout.write(
      `${asset}: every range is already requested by open repair ${(answer.open ?? []).join(', ')}\n`,
    );
  else {
    const r = answer.requested;
    process.stdout.write(
      `${asset}: repair ${r.id} requested (${r.idempotency_key}), ${r.ranges.length} of ${r.ranges_total} range${r.ranges_total === 1 ? '' : 's'}, to be delivered to ${r.sent_to}:\n`,
    );
    for (const range of r.ranges)
      process.stdout.write(
        `  ${range.start} .. ${range.end}  ${range.kind}${range.required_version ? ` (rebuild at ${range.required_version})` : ''}\n`,
      );
  }
  return 0;
}
