#!/usr/bin/env node
/**
 * The `coverage-rollup` command. Only what parsing and help need is imported up front; each
 * command's module (and with it fastify, bullmq, postgres.js, zod, ...) is imported when that
 * command runs, so `--version` and `--help` answer in a few tens of milliseconds.
 */
import { parseArgs } from 'node:util';
import { ConfigError } from '../config/errors.js';
import { nearest } from '../core/nearest.js';
import {
  BadUrlError,
  type LinkFinder,
  type LinkOptions,
  NoDaemonError,
  noDaemonMessage,
  type Where,
  whereTo,
} from './daemon-link.js';
import { COMMAND_HELP, HELP, version } from './help.js';
import { ApiError, apiErrorText, DaemonUnreachableError } from './http-client.js';
import { COMMAND_OPTIONS, commandOf, misplacedOptions, OPTIONS, unknownOption } from './options.js';
import { releaseAll } from './releases.js';

/** Exit codes: 0 ok (or covered), 1 not covered, 2 usage or runtime error. */
async function main(argv: string[]): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (typeof code !== 'string' || !code.startsWith('ERR_PARSE_ARGS')) throw error;
    process.stderr.write(`${usageError(argv, error as Error)}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  const repeated = repeatedOption(parsed.tokens);
  if (repeated !== undefined) {
    const who = commandOf(argv) ? `coverage-rollup ${commandOf(argv)}` : 'coverage-rollup';
    process.stderr.write(`${who}: --${repeated} is given more than once; give it once\n`);
    return 2;
  }
  const misplaced = misplacedOptions(positionals[0], Object.keys(values));
  if (misplaced.length > 0) {
    process.stderr.write(`${unknownOption(positionals[0], `--${misplaced[0]}`, true)}\n`);
    return 2;
  }
  const [command, ...rest] = positionals;
  if (values.version) {
    // Not with emit or check: there it is almost always meant as the event's version, and printing
    // ours and exiting 0 would turn `emit` into a silent no-op and `check` into "covered".
    if (command === 'emit' || command === 'check') {
      process.stderr.write(
        `coverage-rollup ${command}: --version is not an option here (an event's version is --data-version)\n`,
      );
      return 2;
    }
    process.stdout.write(`${version()}\n`);
    return 0;
  }
  const commandHelp = command === undefined ? undefined : COMMAND_HELP[command];
  if (values.help && commandHelp !== undefined) {
    process.stdout.write(commandHelp);
    return 0;
  }
  if (values.help || command === undefined || command === 'help') {
    process.stdout.write(HELP);
    return command === undefined && !values.help ? 2 : 0;
  }
  switch (command) {
    case 'start':
      return (await import('./commands/start.js')).runStart(values);
    case 'migrate':
      return (await import('./commands/migrate.js')).runMigrate(values);
    case 'check':
      return onDaemonOrDatabase(
        'check',
        values,
        async (link) => (await import('./remote/check.js')).checkOverHttp(rest, values, link),
        async () => (await import('./commands/check.js')).runCheck(rest, values),
      );
    case 'emit':
      return onDaemonOrDatabase(
        'emit',
        values,
        async (link) => (await import('./remote/emit.js')).emitOverHttp(rest, values, link),
        async () => (await import('./commands/emit.js')).runEmit(rest, values),
      );
    case 'status':
      return onDaemonOrDatabase(
        'status',
        values,
        async (link) => (await import('./remote/status.js')).statusOverHttp(values, link),
        async () => (await import('./commands/status.js')).runStatus(values),
      );
    case 'demo':
      return (await import('./commands/demo.js')).runDemo(values);
    case 'prune':
      return (await import('./commands/prune.js')).runPrune(values);
    case 'retry':
      return onDaemonOrDatabase(
        'retry',
        values,
        async (link) => (await import('./remote/retry.js')).retryOverHttp(rest, values, link),
        async () => (await import('./commands/retry.js')).runRetry(rest, values),
      );
    case 'repair':
      return onDaemonOrDatabase(
        'repair',
        values,
        async (link) => (await import('./remote/repair.js')).repairOverHttp(rest, values, link),
        async () => (await import('./commands/repair.js')).runRepair(rest, values),
      );
    case 'reload':
      return onDaemonOrDatabase('reload', values, async (link) =>
        (await import('./remote/reload.js')).reloadOverHttp(rest, values, link),
      );
    default: {
      const near = nearest(command ?? '', Object.keys(COMMAND_HELP));
      const hint = near === undefined ? '' : ` (did you mean ${near}?)`;
      process.stderr.write(
        `coverage-rollup: unknown command "${command}"${hint}; see coverage-rollup --help
`,
      );
      return 2;
    }
  }
}

/**
 * A command that acts on a daemon: over its API when one is found (--url, or the record in the
 * data directory), on a database directly when one is named (--config, DATABASE_URL, the embedded
 * data of a stopped daemon), else a message saying how to point it (daemon-link.ts).
 */
async function onDaemonOrDatabase(
  command: string,
  values: LinkOptions,
  overHttp: (link: LinkFinder) => Promise<number>,
  /** Absent: only a running daemon can do it (the database is never read directly). */
  direct?: () => Promise<number>,
): Promise<number> {
  let where: Where;
  try {
    where = whereTo(values, process.env, direct === undefined);
  } catch (error) {
    if (!(error instanceof BadUrlError)) throw error;
    process.stderr.write(`coverage-rollup ${command}: ${error.message}\n`);
    return 2;
  }
  if (where.kind === 'database' && direct) return direct();
  // Asked for only once the command's arguments are checked: a usage error comes first.
  const link = () => {
    if (where.kind === 'none') throw new NoDaemonError(noDaemonMessage(command, where.why));
    if (where.kind === 'database')
      throw new Error('unreachable: a daemon-only command never reads a database');
    return where.link;
  };
  try {
    return await overHttp(link);
  } catch (error) {
    if (error instanceof NoDaemonError) process.stderr.write(`${error.message}\n`);
    else if (error instanceof ApiError)
      process.stderr.write(`coverage-rollup ${command}: ${apiErrorText(error, link())}\n`);
    else if (error instanceof DaemonUnreachableError)
      process.stderr.write(`coverage-rollup ${command}: ${error.message}\n`);
    else throw error;
    return 2;
  }
}

/** Runs the command, then stops an embedded server it started for itself (never the daemon's). */
async function mainReleasing(argv: string[]): Promise<number> {
  try {
    return await main(argv);
  } finally {
    await releaseAll();
  }
}

function parse(argv: string[]) {
  return parseArgs({ args: argv, allowPositionals: true, strict: true, tokens: true, options: OPTIONS });
}

/**
 * An option with a value given twice (`--end 2 --end 3`): parseArgs keeps the last one, which
 * would resolve a contradiction silently, so it is refused as contradictory flags are.
 */
function repeatedOption(tokens: ReturnType<typeof parse>['tokens']): string | undefined {
  const seen = new Set<string>();
  for (const token of tokens) {
    if (token.kind !== 'option' || token.value === undefined) continue;
    if (seen.has(token.name)) return token.name;
    seen.add(token.name);
  }
  return undefined;
}

/** parseArgs' own words name neither the command nor its options; say both, and where help is. */
function usageError(argv: string[], error: Error & { code?: string }): string {
  const command = commandOf(argv);
  const quoted = /'(-[^']*)'/.exec(error.message)?.[1];
  if (error.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && quoted) return unknownOption(command, quoted);
  const who = command && COMMAND_OPTIONS[command] ? `coverage-rollup ${command}` : 'coverage-rollup';
  const option = quoted?.split(' ')[0] ?? 'an option';
  if (error.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE')
    return error.message.includes('does not take')
      ? `${who}: ${option} takes no value; see ${who} --help`
      : `${who}: ${option} needs a value; see ${who} --help`; // missing, or followed by another option
  return `${who}: ${error.message}; see ${who} --help`;
}

mainReleasing(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    const message =
      error instanceof ConfigError ? error.message : `coverage-rollup: ${(error as Error).message}`;
    process.stderr.write(`${message}\n`);
    process.exitCode = 2;
  },
);
