import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { claimGroups } from '../../../src/scheduler/evaluate.js';

describe('claimGroups', () => {
  it('claims every time rollup together with the limit, and each integer rollup alone, sharing one limit', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(
          fc.record({ id: fc.string({ minLength: 1 }), domain: fc.constantFrom('time', 'integer') }),
          {
            selector: (r) => r.id,
            maxLength: 30,
          },
        ),
        fc.integer({ min: 1, max: 500 }),
        (rollups, limit) => {
          const groups = claimGroups(rollups as Array<{ id: string; domain: 'time' | 'integer' }>, limit);
          const time = rollups.filter((r) => r.domain === 'time').map((r) => r.id);
          const integer = rollups.filter((r) => r.domain === 'integer').map((r) => r.id);
          // Every rollup is in exactly one group.
          expect(groups.flatMap((g) => g.ids).sort()).toEqual(rollups.map((r) => r.id).sort());
          if (time.length > 0) expect(groups[0]).toEqual({ ids: time, limit });
          const alone = groups.filter((g) => g.ids.length === 1 && integer.includes(g.ids[0]!));
          expect(alone.map((g) => g.ids[0])).toEqual(integer);
          // Each integer rollup can claim something, and together about one limit, never a multiple of it.
          for (const g of alone) expect(g.limit).toBeGreaterThanOrEqual(1);
          const shared = alone.reduce((n, g) => n + g.limit, 0);
          if (integer.length > 0) expect(shared).toBeLessThan(limit + integer.length);
        },
      ),
    );
  });
});
