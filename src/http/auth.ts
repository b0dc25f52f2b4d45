import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { HttpError } from './errors.js';

const digest = (token: string) => createHash('sha256').update(token).digest();

/** Bearer-token checks; tokens are compared in constant time and never logged. */
export class TokenAuth {
  private readonly writeDigests: Buffer[];
  private readonly readDigests: Buffer[];

  constructor(writeTokens: readonly string[], readTokens: readonly string[]) {
    this.writeDigests = writeTokens.map(digest);
    this.readDigests = readTokens.map(digest);
  }

  requireWrite(request: FastifyRequest): void {
    if (this.writeDigests.length === 0) {
      throw new HttpError(403, 'writes_disabled', 'writes are disabled: set API_TOKENS to enable them');
    }
    this.check(request, this.writeDigests);
  }

  requireRead(request: FastifyRequest): void {
    if (this.readDigests.length === 0) return;
    this.check(request, [...this.readDigests, ...this.writeDigests]);
  }

  private check(request: FastifyRequest, allowed: readonly Buffer[]): void {
    const header = request.headers.authorization;
    const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!match) throw new HttpError(401, 'unauthorized', 'send "Authorization: Bearer <token>"');
    const given = digest(match[1]!);
    // Compare against every token so timing does not reveal which one matched.
    let ok = false;
    for (const d of allowed) ok = timingSafeEqual(given, d) || ok;
    if (!ok) throw new HttpError(403, 'forbidden', 'the bearer token is not valid for this request');
  }
}
