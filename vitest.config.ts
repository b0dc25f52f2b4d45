import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The real-system suites need the venvs of `npm run test:real` (vitest.real.config.ts).
    exclude: [...configDefaults.exclude, 'test/real/**'],
    globalSetup: ['test/helpers/global-setup.ts'],
    // Sized for a loaded machine (the suite beside two CPU hogs on two cores), above the waits'
    // own deadline (test/helpers/wait.ts LOADED_DEADLINE_MS): only a failing test waits it out.
    testTimeout: 240_000,
    hookTimeout: 240_000,
    // Two cores: integration files each get their own database and queue prefix, so they may overlap.
    maxWorkers: 2,
  },
});
