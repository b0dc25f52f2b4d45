/**
 * Per-file cleanup that works wherever a helper is called: at module level, in beforeAll, or in
 * a test. vitest drops an afterAll registered from inside a hook or a test, so the helpers push
 * their cleanups here and this module registers ONE afterAll while the file is being collected
 * (its import runs then). Stack order: it is registered first, so it runs after the file's own
 * afterAll hooks have stopped the daemons and closed the pools that use these resources.
 */
import { afterAll } from 'vitest';

const cleanups: Array<() => Promise<void>> = [];

afterAll(async () => {
  const errors: unknown[] = [];
  // Newest first, as hooks would: a later resource may depend on an earlier one.
  for (const cleanup of cleanups.splice(0).reverse()) {
    try {
      await cleanup();
    } catch (error) {
      errors.push(error);
    }
  }
  if (errors.length > 0) throw new AggregateError(errors, `${errors.length} test cleanup(s) failed`);
});

/** Runs `cleanup` once this test file has finished, whatever called it. */
export function atFileEnd(cleanup: () => Promise<void>): void {
  cleanups.push(cleanup);
}
