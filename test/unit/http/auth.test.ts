/**
 * Bearer tokens: writes need one of api_tokens, or the local token `start` records for this
 * machine's commands, which also works where api_tokens is empty and writes are otherwise disabled.
 */
import type { FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { TokenAuth } from '../../../src/http/auth.js';

const API = 'api-token-0123456789abcdef';
const LOCAL = 'local-token-0123456789abcdef';
const READ = 'read-token-0123456789abcdef';

const bearing = (token?: string) =>
  ({ headers: token === undefined ? {} : { authorization: `Bearer ${token}` } }) as FastifyRequest;
const refusal = (check: () => void) => {
  try {
    check();
    return 'allowed';
  } catch (error) {
    return (error as { code: string }).code;
  }
};

describe('TokenAuth', () => {
  it('without api_tokens refuses every write but the local token', () => {
    const auth = new TokenAuth([], [], LOCAL);
    expect(refusal(() => auth.requireWrite(bearing(LOCAL)))).toBe('allowed');
    expect(refusal(() => auth.requireWrite(bearing()))).toBe('writes_disabled');
    expect(refusal(() => auth.requireWrite(bearing(API)))).toBe('writes_disabled');
    expect(refusal(() => new TokenAuth([], []).requireWrite(bearing(LOCAL)))).toBe('writes_disabled');
  });

  it('with api_tokens takes any of them or the local token, and no other', () => {
    const auth = new TokenAuth([API], [READ], LOCAL);
    expect(refusal(() => auth.requireWrite(bearing(API)))).toBe('allowed');
    expect(refusal(() => auth.requireWrite(bearing(LOCAL)))).toBe('allowed');
    expect(refusal(() => auth.requireWrite(bearing(READ)))).toBe('forbidden');
    expect(refusal(() => auth.requireWrite(bearing()))).toBe('unauthorized');
  });

  it('lets the local token read where reads need a token', () => {
    const auth = new TokenAuth([], [READ], LOCAL);
    expect(refusal(() => auth.requireRead(bearing(LOCAL)))).toBe('allowed');
    expect(refusal(() => auth.requireRead(bearing(READ)))).toBe('allowed');
    expect(refusal(() => auth.requireRead(bearing('nope-0123456789abcdef')))).toBe('forbidden');
  });
});
