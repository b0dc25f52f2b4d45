import type { onRouteHookHandler } from 'fastify';
import { retryTransient } from '../store/pg/transient.js';

/**
 * For the onRoute hook: a read (GET, HEAD) that fails transiently before it answers (its pooled
 * connection went stale and was given up, was reset or closed, its backend was terminated) runs
 * again, with the same backoff as ingest's commits, for up to `withinMs` after the first failure
 * (the stall bound, queue.pg_stall_timeout), instead of answering 500. The pool's other
 * connections may be stranded too, and the stale-connection watch gives each of them up within
 * that bound, so one of the tries ends on a fresh connection. Reads change nothing, so running
 * one again is safe; writes are left to their callers' retries.
 */
export function retryReadsOnLostConnection(withinMs: number): onRouteHookHandler {
  return (route) => {
    const methods = [route.method].flat();
    if (!methods.every((m) => m === 'GET' || m === 'HEAD')) return;
    const handler = route.handler;
    route.handler = async function (this: unknown, request, reply) {
      return retryTransient(async () => handler.call(this as never, request, reply), {
        withinMs,
        stopped: () => reply.sent,
        onRetry: (error, attempt) =>
          request.log.warn(
            { err: error, url: request.url, attempt: attempt + 1 },
            'PostgreSQL connection lost under a read; read again',
          ),
      });
    };
  };
}
