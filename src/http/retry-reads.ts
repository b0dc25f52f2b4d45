import type { RouteOptions } from 'fastify';

/**
 * Errors of a PostgreSQL connection lost under a statement, not of the statement: a stale flow
 * given up (src/store/pg/stale-connections.ts destroys it with ECONNRESET), a reset, a close.
 */
const CONNECTION_LOST = new Set(['ECONNRESET', 'EPIPE', 'CONNECTION_CLOSED']);

export function isConnectionLost(error: unknown): boolean {
  return CONNECTION_LOST.has((error as { code?: unknown } | null)?.code as string);
}

/**
 * For the onRoute hook: a read (GET, HEAD) whose connection was lost before it answered runs once
 * more, on another connection of the pool, instead of answering 500. Reads change nothing, so
 * running one twice is safe; writes are left to their callers' retries.
 */
export function retryReadsOnLostConnection(route: RouteOptions): void {
  const methods = [route.method].flat();
  if (!methods.every((m) => m === 'GET' || m === 'HEAD')) return;
  const handler = route.handler;
  route.handler = async function (this: unknown, request, reply) {
    try {
      return await handler.call(this as never, request, reply);
    } catch (error) {
      if (!isConnectionLost(error) || reply.sent) throw error;
      request.log.warn(
        { err: error, url: request.url },
        'PostgreSQL connection lost under a read; read again',
      );
      return handler.call(this as never, request, reply);
    }
  };
}
