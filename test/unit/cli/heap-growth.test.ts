import { describe, expect, it } from 'vitest';
import { boundHeapGrowth } from '../../../src/cli/heap-growth.js';

describe('boundHeapGrowth', () => {
  it("leaves an operator's own --heap-growing-percent alone, on the command line or in NODE_OPTIONS", () => {
    expect(boundHeapGrowth(['--heap-growing-percent=50'], '')).toBe(false);
    expect(boundHeapGrowth([], '--max-old-space-size=512 --heap_growing_percent=30')).toBe(false);
  });

  it('sets it otherwise', () => {
    expect(boundHeapGrowth([], '--max-old-space-size=512')).toBe(true);
  });
});
