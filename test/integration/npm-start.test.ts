import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/paths.js';
import { createTestDatabase } from '../helpers/db.js';
import { REDIS_URL } from '../helpers/env.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

/**
 * `npm start` as a supervisor runs it (systemd, a container's init, a process manager): SIGTERM
 * goes to the npm process only, and the daemon must stop with it rather than be orphaned. The
 * build is done by the global setup, so `--ignore-scripts` skips `prestart` (a second tsc would
 * rewrite dist/ under the daemons of other test files); the `start` script itself still runs.
 */

const db = await createTestDatabase();
const prefix = createTestPrefix();
const dir = mkdtempSync(join(tmpdir(), 'coverage-rollup-npm-start-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Daemon pids a failed test may have left running: killed after each test. */
const started = new Set<number>();
afterEach(() => {
  for (const pid of started) if (alive(pid)) process.kill(pid, 'SIGKILL');
  started.clear();
});

/** Running, and not a zombie (an orphan is reaped by init, which may take its time in a container). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

describe('npm start', () => {
  it('stops the daemon when the npm process is sent SIGTERM, and the port closes', async () => {
    const config = join(dir, 'config.yaml');
    writeFileSync(
      config,
      JSON.stringify({
        database_url: db.url,
        redis_url: REDIS_URL,
        http: { host: '127.0.0.1', port: 0 },
        queue: { prefix },
        scheduler: { enabled: false },
      }),
    );
    const env: NodeJS.ProcessEnv = { ...process.env, COVERAGE_ROLLUP_CONFIG: config };
    for (const key of ['DATABASE_URL', 'REDIS_URL', 'PORT', 'LOG_LEVEL', 'API_TOKENS']) delete env[key];
    const npm = spawn('npm', ['start', '--ignore-scripts'], {
      cwd: packageRoot(),
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output: string[] = [];
    const logs: Array<{ msg?: string; pid?: number; url?: string }> = [];
    for (const stream of [npm.stdout, npm.stderr]) {
      createInterface({ input: stream }).on('line', (line) => {
        output.push(line);
        try {
          logs.push(JSON.parse(line));
        } catch {
          // npm's own banner lines
        }
      });
    }
    const npmExit = new Promise<number | null>((resolve) => npm.once('exit', (code) => resolve(code)));

    const listening = await waitFor(() => logs.find((l) => l.msg === 'listening'), {
      timeout: 60_000,
      what: `the daemon to listen\n${output.join('\n')}`,
    });
    const daemonPid = listening.pid!;
    started.add(daemonPid);
    expect(daemonPid).not.toBe(npm.pid);
    expect((await fetch(`${listening.url}/healthz`)).status).toBe(200);

    npm.kill('SIGTERM');
    await npmExit;
    await waitFor(() => !alive(daemonPid), { timeout: 30_000, what: `daemon pid ${daemonPid} to exit` });
    await expect(fetch(`${listening.url}/healthz`)).rejects.toThrow();
    // It drained rather than died: the daemon logged its own clean shutdown.
    expect(logs.map((l) => l.msg)).toEqual(expect.arrayContaining(['shutting down', 'stopped']));
  });
});
