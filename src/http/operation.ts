/**
 * One HTTP operation as data: its path, who may call it, the schemas of its request and its
 * answers. Routes are registered from these (./route.ts) and `/openapi.json` is generated from
 * them (./openapi.ts), so the description and the code share one definition.
 */
import type { z } from 'zod';
import type { Caller } from './auth.js';

/**
 * Who may call an operation (src/http/auth.ts decides, route.ts asks it before anything else):
 * - `public`: anyone.
 * - `read`: anyone, unless `read_tokens` or `tokens` is set; then a token with the read scope
 *   (read_tokens, api_tokens, a scoped token with `read`).
 * - `metrics`: as `read`, unless `metrics.public` is true.
 * - `events`, `rollups`, `admin`: a token with that scope (api_tokens have every scope); writes
 *   are refused when no token may write. For `events` and `rollups` the names written must match
 *   the token's patterns too: the path parameter `scopedBy` names, or the handler checks them
 *   with `allow(input.caller, need)`. An `admin` GET is open where no token is configured at all.
 */
export type Access = 'public' | 'read' | 'metrics' | 'events' | 'rollups' | 'admin';

export interface Answer {
  readonly description: string;
  readonly schema: z.ZodType;
  /** Defaults to application/json. */
  readonly contentType?: string;
}

export interface Operation {
  readonly method: 'GET' | 'POST';
  /** In OpenAPI form: `/v1/assets/{asset}/coverage`. */
  readonly path: string;
  readonly id: string;
  readonly summary: string;
  readonly description?: string;
  readonly access: Access;
  /**
   * For `events` and `rollups`: the path parameter that names the asset or rollup written
   * (`asset`, `id`), checked against the token's patterns before the handler runs. Absent, the
   * handler checks the names it writes itself (src/http/auth.ts `allow`).
   */
  readonly scopedBy?: string;
  /** Its group in the document; defaults to the path's first segment after /v1 (see tagOf). */
  readonly tag?: string;
  readonly params?: z.ZodObject;
  readonly query?: z.ZodObject;
  readonly body?: { readonly description: string; readonly schema: z.ZodType };
  /** Success answers by status; the first is the status a handler answers unless it sets another. */
  readonly answers: Readonly<Record<number, Answer>>;
  /**
   * Error statuses this operation answers (an `ErrorBody`), with what they mean. Statuses the
   * access rule implies (401, 403) and 500 are added by the document generator.
   */
  readonly errors: Readonly<Record<number, string>>;
  /** The body of every error answer; defaults to `ErrorBody`. */
  readonly errorBody?: z.ZodType;
}

/** `/v1/assets/...` -> `assets`; anything outside /v1 (probes, metrics, this description) -> `operations`. */
export function tagOf(op: Operation): string {
  return op.tag ?? /^\/v1\/([^/{]+)/.exec(op.path)?.[1] ?? 'operations';
}

/** The path as fastify's router spells it: `/v1/assets/:asset/coverage`. */
export function routeUrl(op: Operation): string {
  return op.path.replace(/\{(\w+)\}/g, ':$1');
}

/** Keeps the literal types of `op`, so handlers are typed by its schemas. */
export function defineOperation<const O extends Operation>(op: O): O {
  return op;
}

type Parsed<S> = S extends z.ZodType ? z.output<S> : undefined;

/** The request parts of `O` after validation. */
export interface RequestOf<O extends Operation> {
  readonly params: Parsed<O['params']>;
  readonly query: Parsed<O['query']>;
  readonly body: O['body'] extends { schema: infer S } ? Parsed<S> : undefined;
  /** Who calls: the token's name for the audit, and its grant for `allow`. */
  readonly caller: Caller;
}

/** What a handler of `O` may answer: the body of one of its success answers. */
export type AnswerOf<O extends Operation> = {
  [S in keyof O['answers']]: O['answers'][S] extends { schema: infer T } ? Parsed<T> : never;
}[keyof O['answers']];
