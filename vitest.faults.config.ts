import { defineConfig } from 'vitest/config';

/**
 * The long suites: faults, fuzz, soak and scale (test/faults/*.faults.ts). Not part of `npm test`;
 * each has its own npm script that names its file. They spawn the built daemon (the global setup
 * builds dist/ and a migrated template database, as for `npm test`) and run one file at a time.
 */
export default defineConfig({
  test: {
    include: ['test/faults/**/*.faults.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 30 * 60_000,
    hookTimeout: 5 * 60_000,
    teardownTimeout: 60_000,
    fileParallelism: false,
    maxWorkers: 1,
    // The JSON reports go to stdout as well as test-artifacts/faults/.
    silent: false,
  },
});
