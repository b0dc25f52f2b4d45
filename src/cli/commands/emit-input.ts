/**
 * `emit`'s events as given: from flags (one event) or a JSON-lines file, and the flag combinations
 * refused before anything connects. Shared by the database and the HTTP paths.
 */
import { readFileSync } from 'node:fs';

export interface EmitInput {
  readonly asset?: string | undefined;
  readonly start?: string | undefined;
  readonly end?: string | undefined;
  readonly interval?: string | undefined;
  readonly 'data-version'?: string | undefined;
  readonly id?: string | undefined;
  readonly replay?: boolean | undefined;
  readonly file?: string | undefined;
}

const EVENT_FLAGS = ['asset', 'start', 'end', 'interval', 'data-version', 'id', 'replay'] as const;

/** Says what is wrong with emit's arguments and returns the exit code (2); undefined when they are good. */
export function refuseArgs(args: readonly string[], values: EmitInput): number | undefined {
  if (args.length > 0) {
    process.stderr.write(`coverage-rollup emit: unexpected argument "${args[0]}"; see --help\n`);
    return 2;
  }
  const usage = usageError(values);
  if (usage !== undefined) {
    process.stderr.write(`coverage-rollup emit: ${usage}; see --help\n`);
    return 2;
  }
  return undefined;
}

/** Flags that contradict each other would otherwise be resolved silently. */
export function usageError(values: EmitInput): string | undefined {
  const given = EVENT_FLAGS.filter((flag) => values[flag] !== undefined && values[flag] !== false);
  if (values.file !== undefined && given.length > 0) {
    return `--file takes its events from the file; drop --${given.join(', --')}`;
  }
  if (values.file === undefined && given.length === 0) {
    return 'give an event (--asset A --start S --end E, or --interval S/E) or --file F';
  }
  if (values.interval !== undefined && (values.start !== undefined || values.end !== undefined)) {
    return 'give either --interval or --start/--end, not both';
  }
  if (values.replay && values['data-version'] === undefined) {
    return '--replay needs --data-version: the version the range must be rebuilt at';
  }
  return undefined;
}

function fromFlags(values: EmitInput): Record<string, unknown> {
  const event: Record<string, unknown> = { asset: values.asset };
  if (values.interval !== undefined) event.interval = values.interval;
  else Object.assign(event, { start: values.start, end: values.end });
  if (values['data-version'] !== undefined) event.version = values['data-version'];
  if (values.id !== undefined) event.id = values.id;
  if (values.replay) event.type = 'replay_requirement';
  return event;
}

/**
 * The events, and where each came from for messages: `line N: ` of the file, nothing for flags.
 */
export function eventsOf(values: EmitInput): { events: unknown[]; where: (index: number) => string } {
  if (values.file === undefined) return { events: [fromFlags(values)], where: () => '' };
  const { events, lines } = readJsonLines(values.file);
  return { events, where: (i) => `line ${lines[i]}: ` };
}

/** Non-blank lines of a JSON-lines file, parsed, with their 1-based line numbers. */
function readJsonLines(file: string): { events: unknown[]; lines: number[] } {
  const events: unknown[] = [];
  const lines: number[] = [];
  readFileSync(file === '-' ? 0 : file, 'utf8')
    .split('\n')
    .forEach((raw, i) => {
      const line = raw.trim();
      if (line.length === 0) return;
      try {
        events.push(JSON.parse(line));
      } catch {
        throw new Error(`line ${i + 1} of ${file} is not JSON`);
      }
      lines.push(i + 1);
    });
  return { events, lines };
}
