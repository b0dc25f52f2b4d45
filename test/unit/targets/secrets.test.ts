import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig, type TargetConfig } from '../../../src/config/index.js';
import { checkSecretEnv } from '../../../src/config/secret-env.js';
import { renewalTime } from '../../../src/targets/airflow/token.js';
import { scrubSecrets } from '../../../src/targets/requests.js';
import {
  envReferences,
  redactTarget,
  resolveTarget,
  SecretUnavailableError,
  secretValues,
} from '../../../src/targets/secrets.js';

const withTarget = (target: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  rollups: [{ id: 'r', upstream: ['a'], every: 'hour', begin: '2025-01-01', target }],
  ...extra,
});
const targetOf = (target: Record<string, unknown>): TargetConfig =>
  parseConfig(withTarget(target)).rollups[0]!.target;

const airflow = targetOf({
  type: 'airflow',
  url: 'https://af.example',
  dag_id: 'd',
  username: 'svc',
  password: 'literal-password',
});
const webhook = targetOf({
  type: 'webhook',
  url: 'https://hook.example/run',
  headers: { Authorization: 'Bearer literal-token', 'X-Key': { env: 'HOOK_KEY' } },
});

describe('target secrets in the config', () => {
  it.each([
    [{ password: { env: 'AF_PASSWORD' }, username: 'u' }, undefined],
    [{ token: { env: '1BAD' } }, 'rollups[r].target.token.env: expected an environment variable name'],
    [{ token: '' }, 'rollups[r].target.token: must not be empty'],
    [{ token: { env: 'X', extra: 1 } }, 'rollups[r].target.token.extra: unknown key'],
    [{ token: 5 }, 'rollups[r].target.token: expected a string, or {env: NAME}'],
    [{ username: 'u' }, 'rollups[r].target.password: required with username'],
    [{ client_secret: 's' }, 'rollups[r].target.client_id: required with client_secret'],
    [
      { token: 't', username: 'u', password: 'p' },
      'give one of token, username/password or client_id/client_secret',
    ],
  ])('airflow %j', (auth, error) => {
    const raw = withTarget({ type: 'airflow', url: 'https://af.example', dag_id: 'd', ...auth });
    if (error === undefined) expect(() => parseConfig(raw)).not.toThrow();
    else expect(() => parseConfig(raw)).toThrow(error);
  });

  it('takes header values as literals or {env: NAME}', () => {
    expect(webhook).toMatchObject({
      headers: { Authorization: 'Bearer literal-token', 'X-Key': { env: 'HOOK_KEY' } },
    });
    expect(() =>
      parseConfig(withTarget({ type: 'webhook', url: 'https://h.example', headers: { A: { name: 'X' } } })),
    ).toThrow(ConfigError);
  });

  it('a scheduling instance refuses to start when a referenced variable is unset or empty', () => {
    const config = parseConfig(
      withTarget({
        type: 'airflow',
        url: 'https://af.example',
        dag_id: 'd',
        username: 'u',
        password: { env: 'AF_PW' },
      }),
    );
    expect(() => checkSecretEnv(config, {})).toThrow(
      'rollups[r].target.password: environment variable AF_PW is not set',
    );
    expect(() => checkSecretEnv(config, { AF_PW: '' })).toThrow(ConfigError);
    expect(() => checkSecretEnv(config, { AF_PW: 'x' })).not.toThrow();
  });
});

describe('redactTarget', () => {
  it('replaces literal secrets with placeholders and keeps references and identities', () => {
    expect(redactTarget(airflow)).toEqual({
      type: 'airflow',
      url: 'https://af.example',
      dag_id: 'd',
      username: 'svc',
      password: { redacted: true },
      timeout: 10_000,
    });
    expect(redactTarget(webhook)).toEqual({
      type: 'webhook',
      url: 'https://hook.example/run',
      headers: { Authorization: { redacted: true }, 'X-Key': { env: 'HOOK_KEY' } },
      timeout: 10_000,
    });
    const queue = targetOf({ type: 'queue', queue: 'q' });
    expect(redactTarget(queue)).toEqual(queue);
  });

  it('leaves no secret value in what is stored', () => {
    for (const t of [airflow, webhook]) {
      const stored = JSON.stringify(redactTarget(t));
      expect(stored).not.toContain('literal-password');
      expect(stored).not.toContain('literal-token');
    }
  });
});

describe('resolveTarget', () => {
  const roundTrip = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

  it('fills placeholders from the live target that stores the same and references from the environment', () => {
    expect(resolveTarget(roundTrip(redactTarget(webhook)), [airflow, webhook], { HOOK_KEY: 'k' })).toEqual({
      ...webhook,
      headers: { Authorization: 'Bearer literal-token', 'X-Key': 'k' },
    });
    expect(resolveTarget(redactTarget(airflow), [webhook, airflow], {})).toEqual(airflow);
  });

  it('matches whatever the key order of the stored JSON (jsonb reorders keys)', () => {
    const stored = redactTarget(airflow) as Record<string, unknown>;
    const reordered = Object.fromEntries(Object.entries(stored).reverse());
    expect(resolveTarget(reordered as never, [airflow], {})).toEqual(airflow);
  });

  it('takes a rotated literal password from the live config', () => {
    const rotated = { ...airflow, password: 'new-password' } as TargetConfig;
    expect(resolveTarget(redactTarget(airflow), [rotated], {})).toMatchObject({ password: 'new-password' });
  });

  it('never sends a literal secret to a target the config does not pair it with', () => {
    const moved = { ...airflow, url: 'https://elsewhere.example' } as TargetConfig;
    expect(() => resolveTarget(redactTarget(airflow), [moved], {})).toThrow(SecretUnavailableError);
    const otherUser = { ...airflow, username: 'someone-else' } as TargetConfig;
    expect(() => resolveTarget(redactTarget(airflow), [otherUser], {})).toThrow(
      /no rollup in the current config/,
    );
  });

  it('names every unset variable', () => {
    const both = targetOf({
      type: 'airflow',
      url: 'https://af.example',
      dag_id: 'd',
      client_id: { env: 'CID' },
      client_secret: { env: 'CSECRET' },
    });
    expect(() => resolveTarget(redactTarget(both), [], { CID: '' })).toThrow(
      'environment variables CID (client_id), CSECRET (client_secret) not set in this process',
    );
    expect(envReferences(both)).toEqual([
      { field: 'client_id', name: 'CID' },
      { field: 'client_secret', name: 'CSECRET' },
    ]);
  });

  it('lists the secret values of a resolved target, and scrubs them from text', () => {
    const resolved = resolveTarget(redactTarget(webhook), [webhook], { HOOK_KEY: 'hook-key-value' });
    const values = secretValues(resolved);
    expect(values).toEqual(['Bearer literal-token', 'hook-key-value']);
    expect(scrubSecrets('HTTP 400: got Bearer literal-token and hook-key-value', values)).toBe(
      'HTTP 400: got [redacted] and [redacted]',
    );
    expect(scrubSecrets('abc', ['abc'])).toBe('abc');
  });
});

describe('renewalTime', () => {
  const jwt = (claims: Record<string, unknown>) =>
    `e30.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.sig`;

  it('renews a day-long token a minute before expiry, counted from its arrival here', () => {
    // Airflow's clock is an hour ahead of ours: the lifetime still counts from arrival.
    const arrived = 1_000_000_000;
    const iat = arrived / 1000 + 3600;
    expect(renewalTime(jwt({ iat, exp: iat + 86_400 }), arrived)).toBe(arrived + 86_400_000 - 60_000);
  });

  it('renews a short-lived token after three quarters of its life', () => {
    expect(renewalTime(jwt({ iat: 100, exp: 140 }), 5_000)).toBe(5_000 + 30_000);
  });

  it('trusts the clocks without iat, and keeps a token without exp until a 401', () => {
    expect(renewalTime(jwt({ exp: 1000 }), 400_000)).toBe(1_000_000 - 60_000);
    expect(renewalTime(jwt({ exp: 1000 }), 2_000_000)).toBe(2_000_000);
    expect(renewalTime(jwt({ sub: 'x' }), 0)).toBeUndefined();
    expect(renewalTime('not-a-jwt', 0)).toBeUndefined();
    expect(renewalTime('a.!!!.b', 0)).toBeUndefined();
  });
});
