/**
 * Bearer tokens: writes need one of api_tokens, a scoped token with the scope, or the local token
 * `start` records for this machine's commands, which also works where no token may write and
 * writes are otherwise disabled.
 */
import type { FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import type { ScopedToken } from '../../../src/config/tokens.js';
import type { Need } from '../../../src/core/access/scopes.js';
import { hashedName, TokenAuth } from '../../../src/http/auth.js';

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

/** What the write routes ask before reading their input. */
const writeOf = (auth: TokenAuth) => ({
  requireWrite: (request: FastifyRequest) => auth.authorize(request, { scope: 'events' }),
});

describe('TokenAuth', () => {
  it('without api_tokens refuses every write but the local token', () => {
    const auth = new TokenAuth([], [], LOCAL);
    expect(refusal(() => writeOf(auth).requireWrite(bearing(LOCAL)))).toBe('allowed');
    expect(refusal(() => writeOf(auth).requireWrite(bearing()))).toBe('writes_disabled');
    expect(refusal(() => writeOf(auth).requireWrite(bearing(API)))).toBe('writes_disabled');
    expect(refusal(() => writeOf(new TokenAuth([], [])).requireWrite(bearing(LOCAL)))).toBe(
      'writes_disabled',
    );
  });

  it('with api_tokens takes any of them or the local token, and no other', () => {
    const auth = new TokenAuth([API], [READ], LOCAL);
    expect(refusal(() => writeOf(auth).requireWrite(bearing(API)))).toBe('allowed');
    expect(refusal(() => writeOf(auth).requireWrite(bearing(LOCAL)))).toBe('allowed');
    expect(refusal(() => writeOf(auth).requireWrite(bearing(READ)))).toBe('forbidden');
    expect(refusal(() => writeOf(auth).requireWrite(bearing()))).toBe('unauthorized');
  });

  it('lets the local token read where reads need a token', () => {
    const auth = new TokenAuth([], [READ], LOCAL);
    expect(refusal(() => auth.requireRead(bearing(LOCAL)))).toBe('allowed');
    expect(refusal(() => auth.requireRead(bearing(READ)))).toBe('allowed');
    expect(refusal(() => auth.requireRead(bearing('nope-0123456789abcdef')))).toBe('forbidden');
  });

  it('names each caller for the audit, never by its token', () => {
    const auth = new TokenAuth([API], [READ], LOCAL, { scoped: [TEAM_A] });
    const name = (token: string, need: Need = { scope: 'read' }) => auth.authorize(bearing(token), need).name;
    expect(name(API)).toBe(hashedName('api', API));
    expect(name(API)).toMatch(/^api:[0-9a-f]{8}$/);
    expect(name(API)).not.toContain(API.slice(0, 8));
    expect(name(READ)).toMatch(/^read:[0-9a-f]{8}$/);
    expect(name(LOCAL)).toBe('local');
    expect(name(TEAM_A.value, { scope: 'events', assets: ['team_a.x'] })).toBe('team_a');
  });
});

const TEAM_A: ScopedToken = {
  name: 'team_a',
  value: 'team-a-token-0123456789abcdef',
  grant: { scopes: new Set(['events', 'rollups']), assets: ['team_a.*'], rollups: ['team_a.*'] },
};
const WATCHER: ScopedToken = {
  name: 'watcher',
  value: 'watcher-token-0123456789abcdef',
  grant: { scopes: new Set(['read']), assets: [], rollups: [] },
};

describe('scoped tokens', () => {
  const auth = new TokenAuth([], [], LOCAL, { scoped: [TEAM_A, WATCHER] });
  const refused = (token: string | undefined, need: Need, reading?: boolean) => {
    try {
      auth.authorize(bearing(token), need, reading);
      return 'allowed';
    } catch (error) {
      const { code, message, details } = error as { code: string; message: string; details?: object };
      return { code, message, ...details };
    }
  };

  it('enable writes on their own, within their scopes and patterns', () => {
    expect(refused(TEAM_A.value, { scope: 'events', assets: ['team_a.x', 'team_a.y'] })).toBe('allowed');
    expect(refused(TEAM_A.value, { scope: 'rollups', rollup: 'team_a.daily' })).toBe('allowed');
    expect(refused(TEAM_A.value, { scope: 'events', assets: ['team_a.x', 'team_b.x'] })).toEqual({
      code: 'forbidden',
      message: 'the token team_a lacks scope events for asset team_b.x',
      scope: 'events',
      asset: 'team_b.x',
    });
    expect(refused(TEAM_A.value, { scope: 'rollups', rollup: 'team_b.daily' })).toMatchObject({
      code: 'forbidden',
      scope: 'rollups',
      rollup: 'team_b.daily',
    });
    expect(refused(TEAM_A.value, { scope: 'admin' })).toMatchObject({ code: 'forbidden', scope: 'admin' });
    expect(refused(WATCHER.value, { scope: 'events', assets: ['team_a.x'] })).toMatchObject({
      code: 'forbidden',
      message: 'the token watcher lacks scope events',
    });
    expect(refused(undefined, { scope: 'events' })).toMatchObject({ code: 'unauthorized' });
    expect(refused('nope-0123456789abcdef', { scope: 'events' })).toMatchObject({ code: 'forbidden' });
    expect(refused(LOCAL, { scope: 'admin' })).toBe('allowed');
  });

  it('gate reads: a token without the read scope may not read', () => {
    expect(refused(undefined, { scope: 'read' })).toMatchObject({ code: 'unauthorized' });
    expect(refused(WATCHER.value, { scope: 'read' })).toBe('allowed');
    expect(refused(TEAM_A.value, { scope: 'read' })).toMatchObject({ scope: 'read' });
  });

  it('gate /metrics and /readyz detail unless metrics.public', () => {
    expect(refusal(() => auth.requireMetrics(bearing()))).toBe('unauthorized');
    expect(refusal(() => auth.requireMetrics(bearing(WATCHER.value)))).toBe('allowed');
    expect(auth.mayReadDetail(bearing())).toBe(false);
    expect(auth.mayReadDetail(bearing('nope-0123456789abcdef'))).toBe(false);
    expect(auth.mayReadDetail(bearing(TEAM_A.value))).toBe(false);
    expect(auth.mayReadDetail(bearing(WATCHER.value))).toBe(true);
    const open = new TokenAuth([], [], undefined, { scoped: [WATCHER], metricsPublic: true });
    expect(refusal(() => open.requireMetrics(bearing()))).toBe('allowed');
    expect(open.mayReadDetail(bearing())).toBe(true);
    const old = new TokenAuth([API], [READ]);
    expect(refusal(() => old.requireMetrics(bearing()))).toBe('unauthorized');
    expect(refusal(() => new TokenAuth([API], []).requireMetrics(bearing()))).toBe('allowed');
  });

  it('leave writes disabled where every scoped token only reads', () => {
    const readers = new TokenAuth([], [], LOCAL, { scoped: [WATCHER] });
    expect(refusal(() => readers.authorize(bearing(WATCHER.value), { scope: 'events' }))).toBe(
      'writes_disabled',
    );
    expect(refusal(() => readers.authorize(bearing(LOCAL), { scope: 'events' }))).toBe('allowed');
  });

  it('open an admin read where no token is configured at all, as every read is', () => {
    const none = new TokenAuth([], [], LOCAL);
    expect(refusal(() => none.authorize(bearing(), { scope: 'admin' }, true))).toBe('allowed');
    expect(refusal(() => none.authorize(bearing(), { scope: 'admin' }, false))).toBe('writes_disabled');
    expect(refusal(() => new TokenAuth([API], []).authorize(bearing(), { scope: 'admin' }, true))).toBe(
      'unauthorized',
    );
    expect(refused(TEAM_A.value, { scope: 'admin' }, true)).toMatchObject({ scope: 'admin' });
  });
});
