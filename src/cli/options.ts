/**
 * The command line's options, which command takes which, and the message for one it does not
 * know: the command's own options and where its help is, instead of Node's parseArgs text.
 */
import type { ParseArgsConfig } from 'node:util';
import { nearest } from '../core/nearest.js';

export const OPTIONS = {
  config: { type: 'string', short: 'c' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'v' },
  start: { type: 'string' },
  end: { type: 'string' },
  limit: { type: 'string' },
  json: { type: 'boolean' },
  asset: { type: 'string' },
  'data-version': { type: 'string' },
  id: { type: 'string' },
  interval: { type: 'string' },
  replay: { type: 'boolean' },
  file: { type: 'string', short: 'f' },
  serve: { type: 'boolean' },
  database: { type: 'string' },
  chain: { type: 'boolean' },
  order: { type: 'string' },
  'max-lag': { type: 'string' },
  'require-known': { type: 'boolean' },
  'dry-run': { type: 'boolean' },
  period: { type: 'string' },
  failed: { type: 'boolean' },
  target: { type: 'string' },
  url: { type: 'string' },
} as const satisfies NonNullable<ParseArgsConfig['options']>;

type Option = keyof typeof OPTIONS;

/** Every command takes these. */
const COMMON: readonly Option[] = ['config', 'help', 'version'];

/** Each command's own options; a command missing here takes any option (checked by itself). */
export const COMMAND_OPTIONS: Readonly<Record<string, readonly Option[]>> = {
  start: [],
  migrate: [],
  check: ['start', 'end', 'limit', 'order', 'max-lag', 'require-known', 'json', 'url'],
  emit: ['asset', 'start', 'end', 'interval', 'data-version', 'id', 'replay', 'file', 'url'],
  status: ['json', 'url'],
  prune: ['dry-run', 'json'],
  retry: ['period', 'failed', 'start', 'end', 'json', 'url'],
  repair: ['start', 'end', 'target', 'json', 'url'],
  reload: ['json', 'url'],
  demo: ['serve', 'chain', 'database'],
};

/** The first word that is not an option (or an option's value): the command, if any. */
export function commandOf(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') return argv[i + 1];
    if (!arg.startsWith('-')) return arg;
    const long = arg.startsWith('--') ? arg.slice(2) : undefined;
    const option = long
      ? OPTIONS[long as Option]
      : Object.values(OPTIONS).find((o) => 'short' in o && `-${o.short}` === arg);
    if (option?.type === 'string' && !arg.includes('=')) i++; // skip its value
  }
  return undefined;
}

/**
 * "coverage-rollup check: unknown option --strat (did you mean --start?); its options are
 * --start S, ...; see coverage-rollup check --help". `elsewhere`: an option of another command.
 */
export function unknownOption(command: string | undefined, option: string, elsewhere = false): string {
  const known = command === undefined ? undefined : COMMAND_OPTIONS[command];
  const who = known ? `coverage-rollup ${command}` : 'coverage-rollup';
  const list = known ? [...known, 'config', 'help'] : COMMON;
  const near = elsewhere
    ? undefined
    : nearest(option.replace(/^-+/, '').split('=')[0] ?? '', known ?? Object.keys(OPTIONS));
  const what = elsewhere ? `${option} is not an option of ${command}` : `unknown option ${option}`;
  return (
    `${who}: ${what}${near ? ` (did you mean --${near}?)` : ''}; ` +
    `${known ? 'its' : 'the'} options are ${(list as Option[]).map(flag).join(', ')}; see ${who} --help`
  );
}

/** An option given to a command that does not take it (parseArgs knows it from another command). */
export function misplacedOptions(command: string | undefined, given: readonly string[]): string[] {
  const known = command === undefined ? undefined : COMMAND_OPTIONS[command];
  if (!known) return [];
  return given.filter((name) => !known.includes(name as Option) && !COMMON.includes(name as Option));
}

/** What each string option's value is called in the help. */
const VALUE_NAMES: Partial<Record<Option, string>> = {
  config: 'FILE',
  file: 'F',
  start: 'S',
  end: 'E',
  limit: 'N',
  order: 'oldest|newest',
  'max-lag': 'D',
  asset: 'A',
  'data-version': 'V',
  id: 'ID',
  interval: 'S/E',
  database: 'NAME',
  period: 'KEY',
  target: 'T',
  url: 'URL',
};

function flag(name: Option): string {
  return OPTIONS[name].type === 'string' ? `--${name} ${VALUE_NAMES[name] ?? 'VALUE'}` : `--${name}`;
}
