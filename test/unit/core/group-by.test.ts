import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { groupBy } from '../../../src/core/group-by.js';

describe('groupBy', () => {
  it('keeps every item once, in order, under its key', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 20 })), (items) => {
        const groups = groupBy(items, (x) => x % 3);
        expect([...groups.values()].flat().sort((a, b) => a - b)).toEqual([...items].sort((a, b) => a - b));
        for (const [key, group] of groups) expect(group).toEqual(items.filter((x) => x % 3 === key));
      }),
    );
  });
});
