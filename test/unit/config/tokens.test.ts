/** `tokens:` and `metrics.public`: the schema's refusals, and the values read from the environment. */
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../../src/config/index.js';
import { resolveTokens } from '../../../src/config/tokens.js';

const teamA = {
  name: 'team_a',
  token: { env: 'TEAM_A_TOKEN' },
  scopes: ['events', 'rollups'],
  assets: ['team_a.*'],
  rollups: ['team_a.*'],
};
const errorOf = (raw: unknown) => {
  try {
    parseConfig(raw);
    return 'accepted';
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
};

describe('tokens:', () => {
  it('defaults to none, and /metrics to the read gate', () => {
    const config = parseConfig({});
    expect(config.tokens).toEqual([]);
    expect(config.metrics).toEqual({ public: false });
    expect(parseConfig({ metrics: { public: true } }).metrics.public).toBe(true);
  });

  it('reads a token with its scopes and patterns', () => {
    const [token] = parseConfig({
      tokens: [teamA, { name: 'ops', token: { env: 'OPS' }, scopes: ['admin'] }],
    }).tokens;
    expect(token).toEqual(teamA);
  });

  it('refuses, each naming the token: a duplicate name or variable, an unknown scope, a bad pattern, a literal token', () => {
    const message = errorOf({
      tokens: [
        teamA,
        { ...teamA, token: { env: 'OTHER' } },
        { name: 'b', token: { env: 'TEAM_A_TOKEN' }, scopes: ['read'] },
        { name: 'c', token: { env: 'C' }, scopes: ['write'] },
        { name: 'd', token: { env: 'D' }, scopes: ['events'], assets: ['a*b'] },
        { name: 'e', token: 'literal-token-0123456789', scopes: ['read'] },
        { name: 'local', token: { env: 'L' }, scopes: ['read'] },
      ],
    });
    expect(message).toContain('tokens[team_a].name: duplicate name team_a');
    expect(message).toContain('tokens[b].token.env: TEAM_A_TOKEN is already the token of another entry');
    expect(message).toContain(
      'tokens[c].scopes[0]: unknown scope: expected one of read, events, rollups, admin',
    );
    expect(message).toContain(
      'tokens[d].assets[0]: each asset pattern must be a name, or a prefix followed by one *',
    );
    expect(message).toContain('tokens[e].token: expected {env: NAME}');
    expect(message).not.toContain('literal-token-0123456789');
    expect(message).toContain('tokens[local].name: local is the name of the local token');
  });

  it('refuses a write scope without its patterns, and patterns without their scope', () => {
    const message = errorOf({
      tokens: [
        { name: 'a', token: { env: 'A' }, scopes: ['events'] },
        { name: 'b', token: { env: 'B' }, scopes: ['read'], rollups: ['x*'] },
        { name: 'c', token: { env: 'C' }, scopes: [] },
      ],
    });
    expect(message).toContain('tokens[a].assets: scope events needs the assets it may write');
    expect(message).toContain(
      'tokens[b].rollups: rollups limits scope rollups, which this token does not have',
    );
    expect(message).toContain('tokens[c].scopes: give at least one scope');
  });
});

describe('resolveTokens', () => {
  const config = parseConfig({ api_tokens: ['api-token-0123456789abcdef'], tokens: [teamA] });

  it('reads each token from its variable, with its grant', () => {
    const [token] = resolveTokens(config, { TEAM_A_TOKEN: ' team-a-token-0123456789 ' });
    expect(token).toMatchObject({ name: 'team_a', value: 'team-a-token-0123456789' });
    expect([...token!.grant.scopes]).toEqual(['events', 'rollups']);
  });

  it('refuses an unset, short or shared token, naming the variable and never the value', () => {
    expect(() => resolveTokens(config, {})).toThrow(
      'tokens[team_a].token.env: environment variable TEAM_A_TOKEN is not set',
    );
    expect(() => resolveTokens(config, { TEAM_A_TOKEN: 'short' })).toThrow(/shorter than 16 characters/);
    const shared = () => resolveTokens(config, { TEAM_A_TOKEN: 'api-token-0123456789abcdef' });
    expect(shared).toThrow('the token in TEAM_A_TOKEN is also one of api_tokens');
    expect(shared).not.toThrow(/api-token-0123456789abcdef/);
  });
});
