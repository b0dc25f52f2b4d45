import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { HttpError } from './errors.js';

const digest = (token: string) => createHash('sha256').update(token).digest();

/**
 * Bearer-token checks; tokens are compared in constant time and never logged. The local token is
 * the one `coverage-rollup start` makes at each start and records in the data directory for its
 * own user's commands (src/support/daemon-record.ts): it may do anything, even where API_TOKENS is
 * unset and writes are otherwise disabled.
 */
export class TokenAuth {
  private readonly writeDigests: Buffer[];
  private readonly readDigests: Buffer[];
  private readonly localDigests: Buffer[];

  constructor(writeTokens: readonly string[], readTokens: readonly string[], localToken?: string) {
    this.writeDigests = writeTokens.map(digest);
    this.readDigests = readTokens.map(digest);
    this.localDigests = localToken === undefined ? [] : [digest(localToken)];
  }

  requireWrite(request: FastifyRequest): void {
    if (this.writeDigests.length === 0) {
      if (this.localDigests.length > 0 && this.matches(request, this.localDigests)) return;
      throw new HttpError(403, 'writes_disabled', 'writes are disabled: set API_TOKENS to enable them');
    }
    this.check(request, [...this.writeDigests, ...this.localDigests]);
  }

  /**
   * Who a write that passed requireWrite is recorded as: `local` for this machine's commands (the
   * local token), else `api` (a token of api_tokens; tokens are never recorded).
   */
  writerOf(request: FastifyRequest): string {
    return this.localDigests.length > 0 && this.matches(request, this.localDigests) ? 'local' : 'api';
  }

  requireRead(request: FastifyRequest): void {
    if (this.readDigests.length === 0) return;
    this.check(request, [...this.readDigests, ...this.writeDigests, ...this.localDigests]);
  }

  /** Whether the request bears one of these tokens (no error either way). */
  private matches(request: FastifyRequest, allowed: readonly Buffer[]): boolean {
    const match = bearer(request);
    return match !== undefined && anyEqual(digest(match), allowed);
  }

  private check(request: FastifyRequest, allowed: readonly Buffer[]): void {
    const match = bearer(request);
    if (match === undefined) throw new HttpError(401, 'unauthorized', 'send "Authorization: Bearer <token>"');
    if (!anyEqual(digest(match), allowed))
      throw new HttpError(403, 'forbidden', 'the bearer token is not valid for this request');
  }
}

function bearer(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  return (header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null)?.[1];
}

/** Compares against every token so timing does not reveal which one matched. */
function anyEqual(given: Buffer, allowed: readonly Buffer[]): boolean {
  let ok = false;
  for (const d of allowed) ok = timingSafeEqual(given, d) || ok;
  return ok;
}
