/**
 * The connections of BullMQ's PostgreSQL backend as the daemon keeps them (queue-backend.ts): each
 * handle's `error` events reported once per outage, and a queue-events reader that starts where it
 * was asked to and starts again if it could not.
 */

import type { QueueEvents } from 'bullmq';
import type { Logger } from '../support/log.js';

export interface HandleContext {
  /** producer (a Queue), worker, or events (a QueueEvents reader). */
  readonly role: 'producer' | 'worker' | 'events';
  readonly queue: string;
  readonly schema: string;
}

/** Further errors of a handle within this long of its last line are counted, not logged. */
export const ERROR_QUIET_MS = 60_000;

/** Handles watched in this process, numbered so that their lines can be told apart. */
let watched = 0;

interface ErrorSource {
  on(event: 'error', listener: (error: Error) => void): unknown;
}

/**
 * Every BullMQ handle forwards its pool's and LISTEN connection's `error` events, and one with no
 * listener is printed by BullMQ as a bare stack on stderr (QueueBase.emit): a server restart or a
 * terminated session printed one per idle connection. A handle reports the first error of an
 * outage in one line with what it is; the pool opens a new connection on its next query, and
 * BullMQ rebuilds the LISTEN connection on its next wait.
 */
export function connectionErrors(log: Logger | undefined): {
  watch(handle: ErrorSource, context: HandleContext): void;
} {
  return {
    watch(handle, context) {
      // Tells apart two handles on one queue (the events queue has a producer for POST /v1/events
      // and one for ingest's own reads).
      const id = ++watched;
      let loggedAt = Number.NEGATIVE_INFINITY;
      let since = 0;
      handle.on('error', (error) => {
        const now = Date.now();
        if (now - loggedAt < ERROR_QUIET_MS) {
          since++;
          return;
        }
        loggedAt = now;
        log?.warn(
          {
            component: 'queue',
            backend: 'postgres',
            ...context,
            handle: id,
            code: (error as { code?: unknown }).code,
            error: error.message,
            ...(since > 0 ? { errors_since_last_line: since } : {}),
          },
          'PostgreSQL queue connection error; the handle reconnects on its next use',
        );
        since = 0;
      });
    },
  };
}

const RESTART_MIN_MS = 250;
const RESTART_MAX_MS = 5_000;

/**
 * Starts a reader created with `autorun: false`. `cursor` (when given) names the event id to read
 * after; it is asked again until it answers, as a reader that started at the stream's end instead
 * ('$', BullMQ's default) would miss every event of the time it took to start, such as the
 * completion of a job removed on completion. A reader whose start failed (its pool could not
 * connect: a server restarting, max_connections reached) starts again after a pause, after the
 * last completion or failure it told of, until it is closed.
 */
export function startEventReader(events: QueueEvents, cursor?: () => Promise<string>): void {
  const opts = events.opts as { lastEventId?: string };
  const closing = () => events.closing !== undefined;
  let lastId: string | undefined;
  const seen = (_args: unknown, id: string) => {
    lastId = id;
  };
  events.on('completed', seen);
  events.on('failed', seen);
  void (async () => {
    if (cursor) {
      for (let attempt = 0; ; attempt++) {
        if (closing()) return;
        try {
          opts.lastEventId = await cursor();
          break;
        } catch (error) {
          events.emit('error', error as Error);
          await pause(attempt);
        }
      }
    }
    for (let attempt = 0; !closing(); attempt++) {
      try {
        await events.run();
        return; // closed
      } catch (error) {
        if (closing()) return;
        events.emit('error', error as Error);
        if (lastId !== undefined) opts.lastEventId = lastId;
        await pause(attempt);
      }
    }
  })();
}

function pause(attempt: number): Promise<void> {
  const ms = Math.min(RESTART_MAX_MS, RESTART_MIN_MS * 2 ** attempt);
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
