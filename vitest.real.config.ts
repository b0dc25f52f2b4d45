import { defineConfig } from 'vitest/config';

/**
 * `npm run test:real` (tools/real/run.mjs): the suites against real Airflow, Dagster, Spark and
 * BullMQ for Python. One file at a time: each starts heavy systems of its own on a 2-core machine.
 */
export default defineConfig({
  test: {
    include: ['test/real/**/*.real.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 300_000,
    hookTimeout: 600_000,
    maxWorkers: 1,
    fileParallelism: false,
  },
});
