import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import type { ScopedToken } from '../config/tokens.js';
import { FULL_GRANT, type Grant, type Lack, lackOf, type Need } from '../core/access/scopes.js';
import { HttpError } from './errors.js';

const digest = (token: string) => createHash('sha256').update(token).digest();

/** Who made a request, as the audit records it, and what its token may do. */
export interface Caller {
  /**
   * A scoped token's name; `api:<hash>` or `read:<hash>` for a token of api_tokens or read_tokens
   * (the first 8 hex digits of its SHA-256: enough to tell tokens apart, nothing to guess one
   * from); `local` for the local token; `anonymous` where reads need no token.
   */
  readonly name: string;
  readonly grant: Grant;
}

const ANONYMOUS: Caller = {
  name: 'anonymous',
  grant: { scopes: new Set(['read']), assets: [], rollups: [] },
};

/** The name a token of api_tokens or read_tokens is recorded under: never the token. */
export function hashedName(kind: 'api' | 'read', token: string): string {
  return `${kind}:${digest(token).toString('hex').slice(0, 8)}`;
}

export interface AuthOptions {
  /** `tokens:` of the config, their values read from the environment (config/tokens.ts). */
  readonly scoped?: readonly ScopedToken[];
  /** `metrics.public`: /metrics and /readyz's detail stay open where reads need a token. */
  readonly metricsPublic?: boolean;
}

/**
 * Bearer tokens, compared in constant time and never logged, and what each may do. api_tokens
 * may do everything, read_tokens read, a scoped token what its scopes and patterns say
 * (core/access/scopes.ts). The local token is the one `coverage-rollup start` makes at each
 * start and records in the data directory for its own user's commands
 * (src/support/daemon-record.ts): it may do anything, even where no write token is configured
 * and writes are otherwise disabled.
 */
export class TokenAuth {
  private readonly known: ReadonlyArray<{ readonly digest: Buffer; readonly caller: Caller }>;
  /** Some token other than the local one may write (api_tokens, or a scoped token with a write scope). */
  private readonly writesEnabled: boolean;
  /** Reads need a token: read_tokens or scoped tokens are set. */
  private readonly readsGated: boolean;
  /** Any token at all is configured (the local one aside). */
  private readonly anyToken: boolean;
  private readonly metricsPublic: boolean;

  constructor(
    writeTokens: readonly string[],
    readTokens: readonly string[],
    localToken?: string,
    options: AuthOptions = {},
  ) {
    const scoped = options.scoped ?? [];
    const readGrant: Grant = { scopes: new Set(['read']), assets: [], rollups: [] };
    this.known = [
      ...writeTokens.map((t) => ({
        digest: digest(t),
        caller: { name: hashedName('api', t), grant: FULL_GRANT },
      })),
      ...readTokens.map((t) => ({
        digest: digest(t),
        caller: { name: hashedName('read', t), grant: readGrant },
      })),
      ...scoped.map((t) => ({ digest: digest(t.value), caller: { name: t.name, grant: t.grant } })),
      ...(localToken === undefined
        ? []
        : [{ digest: digest(localToken), caller: { name: 'local', grant: FULL_GRANT } }]),
    ];
    this.writesEnabled =
      writeTokens.length > 0 || scoped.some(({ grant }) => [...grant.scopes].some((s) => s !== 'read'));
    this.readsGated = readTokens.length > 0 || scoped.length > 0;
    this.anyToken = this.writesEnabled || readTokens.length > 0;
    this.metricsPublic = options.metricsPublic ?? false;
  }

  /**
   * The one check of every request that needs a token (route.ts runs it for an operation's
   * access; a handler runs it again, through `allow`, for the names it writes). Answers the
   * caller, or throws 401 (no token where one is needed), 403 `writes_disabled` (no token may
   * write), or 403 `forbidden` naming the scope the token lacks and the asset or rollup.
   * `reading`: an admin read (the audit) is open, as every read is, where no token is configured.
   */
  authorize(request: FastifyRequest, need: Need, reading = need.scope === 'read'): Caller {
    if (reading && (need.scope === 'read' ? !this.readsGated : !this.anyToken)) return ANONYMOUS;
    if (!reading && !this.writesEnabled) {
      const local = this.identify(request, false);
      if (local?.name !== 'local')
        throw new HttpError(
          403,
          'writes_disabled',
          'writes are disabled: set API_TOKENS (or tokens: with a write scope) to enable them',
        );
      return local;
    }
    const caller = this.identify(request);
    if (caller === undefined)
      throw new HttpError(401, 'unauthorized', 'send "Authorization: Bearer <token>"');
    allow(caller, need);
    return caller;
  }

  requireRead(request: FastifyRequest): void {
    this.authorize(request, { scope: 'read' });
  }

  /** /metrics: a read, unless metrics.public. */
  requireMetrics(request: FastifyRequest): void {
    if (!this.metricsPublic) this.requireRead(request);
  }

  /** Whether /readyz may show its detail (the instance, the lease) to this request: never throws. */
  mayReadDetail(request: FastifyRequest): boolean {
    if (this.metricsPublic || !this.readsGated) return true;
    const caller = this.identify(request, false);
    return caller?.grant.scopes.has('read') ?? false;
  }

  /** The caller bearing a known token; undefined without a bearer; 403 for a token not known. */
  private identify(request: FastifyRequest, strict = true): Caller | undefined {
    const header = request.headers.authorization;
    const token = (header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null)?.[1];
    if (token === undefined) return undefined;
    const given = digest(token);
    // Compared with every token, so timing does not reveal which one matched.
    let found: Caller | undefined;
    for (const k of this.known) if (timingSafeEqual(given, k.digest)) found = k.caller;
    if (found === undefined && strict)
      throw new HttpError(403, 'forbidden', 'the bearer token is not valid for this request');
    return found;
  }
}

/** Throws 403 `forbidden` unless the caller's token covers `need` (the scope, and the names written). */
export function allow(caller: Caller, need: Need): void {
  const lack = lackOf(caller.grant, need);
  if (lack !== null) throw new HttpError(403, 'forbidden', lackMessage(caller, lack), { ...lack });
}

function lackMessage(caller: Caller, lack: Lack): string {
  const on =
    lack.asset !== undefined
      ? ` for asset ${lack.asset}`
      : lack.rollup !== undefined
        ? ` for rollup ${lack.rollup}`
        : '';
  return `the token ${caller.name} lacks scope ${lack.scope}${on}`;
}
