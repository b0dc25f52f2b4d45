/**
 * The embedded default's data directory when it cannot be made: Node 20's recursive
 * mkdir loops forever under /proc, where the kernel answers ENOENT for a parent that exists, and
 * the daemon spun there silently, deaf to SIGTERM. It must fail at once with exit 2, naming the
 * directory.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { CONFIG_ENV_VARS } from '../../src/config/index.js';
import { makeDirectory } from '../../src/embedded/files.js';
import { DAEMON_ENTRY } from '../helpers/process.js';

const dir = mkdtempSync(join(tmpdir(), 'coverage-rollup-data-dir-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the data directory', () => {
  it('is made with its missing parents, each with the mode asked for', () => {
    const nested = join(dir, 'a', 'b', 'c');
    makeDirectory(nested, 0o700);
    makeDirectory(nested, 0o700); // there already: nothing to do
    expect(statSync(nested).isDirectory()).toBe(true);
    expect(statSync(join(dir, 'a')).mode & 0o777).toBe(0o700);
  });

  it.runIf(process.platform === 'linux')('under /proc fails at once rather than loop', () => {
    expect(() => makeDirectory('/proc/coverage-rollup-test/data', 0o755)).toThrow(/ENOENT/);
  });

  it.runIf(process.platform === 'linux')(
    'that cannot be made: start exits 2 at once, naming it',
    async () => {
      const env: NodeJS.ProcessEnv = { ...process.env };
      for (const key of [...CONFIG_ENV_VARS, 'QUEUE_BACKEND']) delete env[key];
      env.COVERAGE_ROLLUP_DATA_DIR = '/proc/coverage-rollup-test';
      env.PORT = '0';
      const run = await promisify(execFile)(process.execPath, [DAEMON_ENTRY, 'start'], {
        env,
        cwd: dir,
        timeout: 30_000,
      }).then(
        () => ({ code: 0, stderr: '' }),
        (error: { code?: number; killed?: boolean; stderr?: string }) => ({
          code: error.killed ? 'killed' : error.code,
          stderr: error.stderr ?? '',
        }),
      );
      expect(run.code).toBe(2);
      expect(run.stderr).toContain('cannot make the data directory /proc/coverage-rollup-test');
    },
    40_000,
  );
});
