/** The scoped tokens of `tokens:`, read from the environment at start-up. */
import type { Grant } from '../core/access/scopes.js';
import { ConfigError } from './errors.js';
import type { Config } from './schema.js';

export interface ScopedToken {
  readonly name: string;
  /** The secret itself: compared in constant time, never logged (src/http/auth.ts). */
  readonly value: string;
  readonly grant: Grant;
}

/** As long as api_tokens and read_tokens must be. */
const MIN_LENGTH = 16;

/**
 * Each token's value from its environment variable. Every problem is reported at once, naming the
 * token and the variable, never the value: unset or empty, too short, or the same value as another
 * token (one token with two names or rights would make the audit and the scopes ambiguous).
 */
export function resolveTokens(
  config: Pick<Config, 'tokens' | 'api_tokens' | 'read_tokens'>,
  env: NodeJS.ProcessEnv,
): ScopedToken[] {
  const problems: string[] = [];
  const seen = new Map<string, string>([
    ...config.api_tokens.map((t) => [t, 'one of api_tokens'] as const),
    ...config.read_tokens.map((t) => [t, 'one of read_tokens'] as const),
  ]);
  const tokens = config.tokens.flatMap((t) => {
    const where = `  tokens[${t.name}].token.env`;
    const value = env[t.token.env]?.trim();
    if (!value) {
      problems.push(`${where}: environment variable ${t.token.env} is not set`);
      return [];
    }
    if (value.length < MIN_LENGTH) {
      problems.push(`${where}: the token in ${t.token.env} is shorter than ${MIN_LENGTH} characters`);
      return [];
    }
    const other = seen.get(value);
    if (other !== undefined) {
      problems.push(`${where}: the token in ${t.token.env} is also ${other}; give each its own`);
      return [];
    }
    seen.set(value, `the token of tokens[${t.name}]`);
    const grant: Grant = { scopes: new Set(t.scopes), assets: t.assets, rollups: t.rollups };
    return [{ name: t.name, value, grant }];
  });
  if (problems.length > 0) throw new ConfigError(`invalid configuration:\n${problems.join('\n')}`);
  return tokens;
}
