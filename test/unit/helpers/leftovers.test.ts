/** The global teardown names the test file behind each leftover (test/helpers/global-setup.ts). */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { namesFile, uniqueName } from '../../helpers/env.js';
import { whoMade } from '../../helpers/global-setup.js';

describe('leftover names', () => {
  it('uniqueName records the file it was called from', () => {
    const name = uniqueName('crtest');
    const lines = readFileSync(namesFile(), 'utf8').split('\n');
    expect(lines).toContain(`${name}\ttest/unit/helpers/leftovers.test.ts`);
  });

  it('a database is named by its own name, a Redis prefix by the name it contains', () => {
    const names = new Map([
      ['cr_test_r1_10_a', 'test/integration/prometheus.test.ts'],
      ['crtest_r1_10_b', 'test/integration/pg-queue/runs-queue.test.ts'],
    ]);
    const madeBy = whoMade(names);
    expect(madeBy('cr_test_r1_10_a')).toBe(' (made by test/integration/prometheus.test.ts)');
    expect(madeBy('{crtest_r1_10_b-1}')).toBe(' (made by test/integration/pg-queue/runs-queue.test.ts)');
    expect(madeBy('cr_test_r1_10_zzz')).toBe('');
  });
});
