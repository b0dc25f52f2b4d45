/**
 * `emit` through a daemon's API: POST /v1/events in batches. Where the daemon's queue is in its
 * PostgreSQL (the embedded default) it commits each batch into the index before answering (200),
 * so `check` answers with the events as soon as emit exits; on Redis it enqueues them (202).
 * Every event is first checked here as far as this side can (its shape and bounds), so a bad
 * line sends nothing; what only the daemon knows (an asset's recorded domain) it refuses per batch.
 */
import { BadInputError } from '../../core/errors.js';
import { normalizeEvent } from '../../core/events/events.js';
import { type EmitInput, eventsOf, refuseArgs } from '../commands/emit-input.js';
import type { LinkFinder } from '../daemon-link.js';
import { ApiError, call } from '../http-client.js';

/** Events per request: the API takes at most 1000, and a body of at most http.body_limit (1 MB). */
const BATCH = 1000;
const BATCH_BYTES = 256 * 1024;

interface Accepted {
  readonly accepted: number;
  readonly results?: ReadonlyArray<{ readonly status: string }>;
}

export async function emitOverHttp(
  args: readonly string[],
  values: EmitInput,
  findLink: LinkFinder,
): Promise<number> {
  const badArgs = refuseArgs(args, values);
  if (badArgs !== undefined) return badArgs;
  const { events, where } = eventsOf(values);
  const invalid = events.flatMap((event, index) => {
    try {
      normalizeEvent(event, { maxPayloadBytes: Number.POSITIVE_INFINITY });
      return [];
    } catch (error) {
      if (!(error instanceof BadInputError)) throw error;
      return [`${where(index)}${error.reason}: ${error.message}`];
    }
  });
  if (invalid.length > 0) {
    process.stderr.write(`nothing sent; ${invalid.length} invalid event(s):\n${invalid.join('\n')}\n`);
    return 2;
  }
  const link = findLink();
  let sent = 0;
  let committed = 0;
  let duplicates = 0;
  let enqueued = 0;
  for (const batch of batches(events)) {
    let answer: { status: number; body: Accepted };
    try {
      answer = await call<Accepted>(link, 'POST', '/v1/events', batch);
    } catch (error) {
      if (!(error instanceof ApiError) || error.code !== 'invalid_events') throw error;
      const errors = (error.body.errors ?? []) as Array<{ index: number; reason: string; message: string }>;
      const lines = errors.map((e) => `${where(sent + e.index)}${e.reason}: ${e.message}`);
      const outcome = sent === 0 ? 'nothing sent' : `${sent} of ${events.length} event(s) sent before`;
      process.stderr.write(`${outcome}; ${lines.length} invalid event(s):\n${lines.join('\n')}\n`);
      return 2;
    }
    sent += batch.length;
    if (answer.status === 202) enqueued += answer.body.accepted;
    for (const r of answer.body.results ?? []) {
      if (r.status === 'committed') committed++;
      else duplicates++;
    }
  }
  if (enqueued > 0) process.stdout.write(`enqueued ${enqueued} event(s) through ${link.url}\n`);
  else {
    const already = duplicates > 0 ? ` (${duplicates} already there: duplicates)` : '';
    process.stdout.write(`committed ${committed + duplicates} event(s) to the index${already}\n`);
  }
  return 0;
}

/** At most BATCH events and about BATCH_BYTES of JSON per request (one event may exceed it alone). */
function* batches(events: readonly unknown[]): Generator<unknown[]> {
  let batch: unknown[] = [];
  let bytes = 0;
  for (const event of events) {
    const size = JSON.stringify(event).length;
    if (batch.length > 0 && (batch.length === BATCH || bytes + size > BATCH_BYTES)) {
      yield batch;
      batch = [];
      bytes = 0;
    }
    batch.push(event);
    bytes += size;
  }
  if (batch.length > 0) yield batch;
}
