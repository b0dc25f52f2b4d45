/**
 * What a token may do: its scopes and, for writes of events and of rollups, the name patterns it
 * is limited to. Pure: the HTTP layer (src/http/auth.ts) finds the token, this decides.
 */

/** `read` reads; `events` writes events and replay requirements; `rollups` writes rollups; `admin` the rest. */
export const SCOPES = ['read', 'events', 'rollups', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

/**
 * A name pattern: a name as it is (`warehouse.orders`), or a prefix ending in `*` (`team_a.*`
 * matches every name that starts with `team_a.`; `*` alone matches every name).
 */
export const PATTERN_RULE = 'a name, or a prefix followed by one * at the end (team_a.*), or * alone';

/** Whether `pattern` is one PATTERN_RULE allows: a `*` only at its end. */
export function isPattern(pattern: string): boolean {
  return pattern.length > 0 && !pattern.slice(0, -1).includes('*');
}

export function matches(pattern: string, name: string): boolean {
  return pattern.endsWith('*') ? name.startsWith(pattern.slice(0, -1)) : name === pattern;
}

export function matchesAny(patterns: readonly string[], name: string): boolean {
  return patterns.some((p) => matches(p, name));
}

export interface Grant {
  readonly scopes: ReadonlySet<Scope>;
  /** The assets `events` may write. */
  readonly assets: readonly string[];
  /** The rollups `rollups` may write. */
  readonly rollups: readonly string[];
}

/** Whether `grant` limits the names it may write for `scope` (not `*`): only then are they worth reading. */
export function limitsNames(grant: Grant, scope: 'events' | 'rollups'): boolean {
  return !(scope === 'events' ? grant.assets : grant.rollups).includes('*');
}

/** Every scope on every name: api_tokens and the local token. */
export const FULL_GRANT: Grant = { scopes: new Set(SCOPES), assets: ['*'], rollups: ['*'] };

/**
 * What a request needs: a scope, and for `events` and `rollups` the names it writes (absent: the
 * scope alone, as checked before the request's names are read).
 */
export type Need =
  | { readonly scope: 'read' | 'admin' }
  | { readonly scope: 'events'; readonly assets?: readonly string[] }
  | { readonly scope: 'rollups'; readonly rollup?: string };

/** Why `grant` does not cover `need`, naming the scope and the first name outside it; null when it does. */
export interface Lack {
  readonly scope: Scope;
  readonly asset?: string;
  readonly rollup?: string;
}

export function lackOf(grant: Grant, need: Need): Lack | null {
  if (!grant.scopes.has(need.scope)) return { scope: need.scope };
  if (need.scope === 'events') {
    const outside = need.assets?.find((a) => !matchesAny(grant.assets, a));
    return outside === undefined ? null : { scope: 'events', asset: outside };
  }
  if (need.scope === 'rollups' && need.rollup !== undefined && !matchesAny(grant.rollups, need.rollup))
    return { scope: 'rollups', rollup: need.rollup };
  return null;
}
