import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { allow, type Caller } from './auth.js';
import type { HttpContext } from './context.js';
import { HttpError } from './errors.js';
import { type AnswerOf, type Operation, type RequestOf, routeUrl } from './operation.js';
import { fieldErrors } from './schemas/common.js';

/**
 * Registers `op`: checks its access rule, validates its path parameters, query and body through
 * its schemas, and answers its first success status unless the handler sets another.
 */
export function route<O extends Operation>(
  app: FastifyInstance,
  ctx: HttpContext,
  op: O,
  handler: (input: RequestOf<O>, request: FastifyRequest, reply: FastifyReply) => Promise<AnswerOf<O>>,
): void {
  const status = Number(Object.keys(op.answers)[0]);
  if (op.scopedBy !== undefined && !op.path.includes(`{${op.scopedBy}}`))
    throw new Error(`${op.id}: scopedBy ${op.scopedBy} is not a parameter of ${op.path}`);
  if (op.scopedBy !== undefined && op.access !== 'events' && op.access !== 'rollups')
    throw new Error(`${op.id}: scopedBy needs access events or rollups`);
  app.route({
    method: op.method,
    url: routeUrl(op),
    handler: async (request, reply) => {
      const caller = callerOf(ctx, op, request);
      refuseNul(request.params, 'path');
      refuseNul(request.query, 'query');
      const params = op.params && validate(op.params, request.params, 'path');
      if (op.scopedBy !== undefined) allowNamed(caller, op, (params as Record<string, unknown>)[op.scopedBy]);
      const query = op.query && validate(op.query, withoutEmpty(request.query), 'query');
      // Checked, then passed on as sent: a parse rebuilds objects and drops keys named
      // `__proto__`, which are data here (docs/events.md); body schemas transform nothing.
      if (op.body) validate(op.body.schema, request.body, 'body');
      const input = { params, query, body: request.body, caller } as RequestOf<O>;
      reply.status(status);
      return handler(input, request, reply);
    },
  });
}

/** The operation's access rule, checked before its input is read (a 401 or 403 before a 400). */
function callerOf(ctx: HttpContext, op: Operation, request: FastifyRequest): Caller {
  switch (op.access) {
    case 'public':
      return PUBLIC;
    case 'metrics':
      ctx.auth.requireMetrics(request);
      return PUBLIC;
    default: {
      const reading = op.access === 'read' || (op.access === 'admin' && op.method === 'GET');
      return ctx.auth.authorize(request, { scope: op.access }, reading);
    }
  }
}

/** Public operations record nobody. */
const PUBLIC: Caller = { name: 'anonymous', grant: { scopes: new Set(), assets: [], rollups: [] } };

/** The asset or rollup a path parameter names, against the token's patterns (`scopedBy`). */
function allowNamed(caller: Caller, op: Operation, name: unknown): void {
  const named = String(name);
  allow(
    caller,
    op.access === 'events' ? { scope: 'events', assets: [named] } : { scope: 'rollups', rollup: named },
  );
}

/**
 * A query parameter sent empty (`?state=&asset=x`, as forms and templated URLs send an unset
 * filter) counts as not given, rather than as a filter on the empty string or a bad value.
 */
function withoutEmpty(query: unknown): unknown {
  if (typeof query !== 'object' || query === null) return query;
  return Object.fromEntries(Object.entries(query).filter(([, value]) => value !== ''));
}

/**
 * No name, key, bound or cursor holds U+0000, and PostgreSQL cannot compare text that does: a
 * parameter with one is refused here rather than fail its query (the document says so, ./openapi.ts).
 */
function refuseNul(values: unknown, part: string): void {
  if (typeof values !== 'object' || values === null) return;
  for (const [name, value] of Object.entries(values)) {
    if ([value].flat().some((v) => typeof v === 'string' && v.includes('\u0000'))) {
      throw new HttpError(
        400,
        'invalid_request',
        `${part} field ${name} holds U+0000 (NUL), which no name, key, bound or cursor does`,
      );
    }
  }
}

/** The first failure answers 400 with the failing field's registered code and message. */
function validate(schema: z.ZodType, value: unknown, part: string): unknown {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const key = issue.path[0];
  const field = schema instanceof z.ZodObject && typeof key === 'string' ? schema.shape[key] : undefined;
  const known = (field && fieldErrors.get(field)) ?? fieldErrors.get(schema);
  if (known) throw new HttpError(400, known.code, known.message);
  const where = key === undefined ? part : `${part} field ${String(key)}`;
  throw new HttpError(400, 'invalid_request', `${where}: ${issue.message}`);
}
