import { readFileSync } from 'node:fs';
import { Queue } from 'bullmq';
import { BadInputError } from '../../core/errors.js';
import { normalizeEvent } from '../../core/events.js';
import { redisConnection } from '../../ingest/redis.js';
import { normalizeOptions } from '../../ingest/worker.js';
import { configFrom, type GlobalOptions } from './shared.js';

interface EmitOptions extends GlobalOptions {
  readonly asset?: string | undefined;
  readonly start?: string | undefined;
  readonly end?: string | undefined;
  readonly interval?: string | undefined;
  readonly 'data-version'?: string | undefined;
  readonly id?: string | undefined;
  readonly replay?: boolean | undefined;
  readonly file?: string | undefined;
}

const CHUNK = 1000;

/** Validates every event first (as the worker will), then enqueues them all or none. */
export async function runEmit(args: string[], values: EmitOptions): Promise<number> {
  if (args.length > 0) {
    process.stderr.write(`coverage-rollup emit: unexpected argument "${args[0]}"; see --help\n`);
    return 2;
  }
  const config = configFrom(values);
  const events = values.file !== undefined ? readJsonLines(values.file) : [fromFlags(values)];
  const options = normalizeOptions(config);
  const errors: string[] = [];
  events.forEach((event, i) => {
    try {
      normalizeEvent(event, options);
    } catch (error) {
      if (!(error instanceof BadInputError)) throw error;
      errors.push(`${values.file !== undefined ? `line ${i + 1}: ` : ''}${error.reason}: ${error.message}`);
    }
  });
  if (errors.length > 0) {
    process.stderr.write(`nothing enqueued; ${errors.length} invalid event(s):\n${errors.join('\n')}\n`);
    return 2;
  }
  const connection = redisConnection(config.redis_url);
  const queue = new Queue(config.queue.name, { connection, prefix: config.queue.prefix });
  try {
    for (let i = 0; i < events.length; i += CHUNK) {
      await queue.addBulk(events.slice(i, i + CHUNK).map((data) => ({ name: 'event', data })));
    }
  } finally {
    await queue.close();
    connection.disconnect();
  }
  process.stdout.write(`enqueued ${events.length} event(s) on ${config.queue.name}\n`);
  return 0;
}

function fromFlags(values: EmitOptions): Record<string, unknown> {
  const event: Record<string, unknown> = { asset: values.asset };
  if (values.interval !== undefined) event.interval = values.interval;
  else Object.assign(event, { start: values.start, end: values.end });
  if (values['data-version'] !== undefined) event.version = values['data-version'];
  if (values.id !== undefined) event.id = values.id;
  if (values.replay) event.type = 'replay_requirement';
  return event;
}

function readJsonLines(file: string): unknown[] {
  const text = readFileSync(file === '-' ? 0 : file, 'utf8');
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line.length > 0)
    .map((line, i) => {
      try {
        return JSON.parse(line) as unknown;
      } catch {
        throw new Error(`line ${i + 1} of ${file} is not JSON`);
      }
    });
}
