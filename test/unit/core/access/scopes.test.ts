/** Scopes and name patterns, against a brute-force model of "a name, or a prefix and a *". */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type Grant,
  isPattern,
  lackOf,
  matches,
  matchesAny,
  type Need,
  SCOPES,
  type Scope,
} from '../../../../src/core/access/scopes.js';

/**
 * The model: a pattern matches a name when the name can be cut into a head and a tail such that
 * the head is the pattern without its star and the tail is empty unless the pattern had the star.
 */
function modelMatches(pattern: string, name: string): boolean {
  const star = pattern.endsWith('*');
  const head = star ? pattern.slice(0, -1) : pattern;
  for (let cut = 0; cut <= name.length; cut++) {
    if (name.slice(0, cut) === head && (star || cut === name.length)) return true;
  }
  return false;
}

// Small alphabets, so patterns and names share prefixes often.
const name = fc.string({ unit: fc.constantFrom('a', 'b', '.', '_'), maxLength: 6 });
const pattern = fc.oneof(
  name.filter((n) => n.length > 0),
  name.map((n) => `${n}*`),
);

describe('name patterns', () => {
  it('match as the model says', () => {
    fc.assert(
      fc.property(pattern, name, (p, n) => {
        expect(matches(p, n)).toBe(modelMatches(p, n));
      }),
      { numRuns: 2000 },
    );
  });

  it('team_a.* takes team_a.x and refuses team_b.x and team_a itself', () => {
    expect(matches('team_a.*', 'team_a.x')).toBe(true);
    expect(matches('team_a.*', 'team_b.x')).toBe(false);
    expect(matches('team_a.*', 'team_a')).toBe(false);
    expect(matches('*', '')).toBe(true);
    expect(matches('orders', 'orders.v2')).toBe(false);
  });

  it('allow a star only at the end', () => {
    expect(['a', 'a*', '*', 'team_a.*'].map(isPattern)).toEqual([true, true, true, true]);
    expect(['', 'a*b', '**', '*a'].map(isPattern)).toEqual([false, false, false, false]);
  });
});

describe('lackOf', () => {
  const grant = fc.record({
    scopes: fc.subarray([...SCOPES]).map((s) => new Set<Scope>(s)),
    assets: fc.array(pattern, { maxLength: 3 }),
    rollups: fc.array(pattern, { maxLength: 3 }),
  });
  const need: fc.Arbitrary<Need> = fc.oneof(
    fc.constantFrom<Need>({ scope: 'read' }, { scope: 'admin' }),
    fc.array(name, { maxLength: 4 }).map((assets) => ({ scope: 'events' as const, assets })),
    name.map((rollup) => ({ scope: 'rollups' as const, rollup })),
  );

  it('allows exactly what the model allows, and names the scope and the first name outside it', () => {
    fc.assert(
      fc.property(grant, need, (g: Grant, n) => {
        const anyMatch = (patterns: readonly string[], x: string) => patterns.some((p) => modelMatches(p, x));
        const lack = lackOf(g, n);
        if (!g.scopes.has(n.scope)) {
          expect(lack).toEqual({ scope: n.scope });
        } else if (n.scope === 'events') {
          const outside = (n.assets ?? []).filter((a) => !anyMatch(g.assets, a));
          expect(lack).toEqual(outside.length === 0 ? null : { scope: 'events', asset: outside[0] });
        } else if (n.scope === 'rollups') {
          expect(lack).toEqual(
            anyMatch(g.rollups, n.rollup!) ? null : { scope: 'rollups', rollup: n.rollup },
          );
        } else {
          expect(lack).toBeNull();
        }
        expect(matchesAny(g.assets, 'x')).toBe(anyMatch(g.assets, 'x'));
      }),
      { numRuns: 2000 },
    );
  });
});
