import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The real-system suites need the venvs of `npm run test:real` (vitest.real.config.ts).
    exclude: [...configDefaults.exclude, 'test/real/**'],
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: integration files each get their own database and queue prefix, so they may overlap.
    maxWorkers: 2,
  },
});
