/**
 * The daemon's log: readable lines for people (LOG_FORMAT=pretty, the default at a terminal), JSON
 * for machines (LOG_FORMAT=json, the default anywhere else), secrets redacted in both; a bad
 * LOG_FORMAT is a config error naming it. Through the built code, as `start` writes it: to fd 1.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CONFIG_ENV_VARS } from '../../src/config/index.js';
import { packageRoot } from '../../src/support/paths.js';
import { DAEMON_ENTRY } from '../helpers/process.js';

const LOG = pathToFileURL(join(packageRoot(), 'dist', 'src', 'support', 'log.js')).href;

/** One line logged with a secret in it, through daemonDestination(format); `tty`: under `script`, a terminal. */
function logOnce(format: string, tty = false): Promise<string> {
  const script = `
    import { createLogger, daemonDestination } from ${JSON.stringify(LOG)};
    const log = createLogger('info', daemonDestination(${format === 'default' ? 'undefined' : JSON.stringify(format)}));
    log.info({ token: 'sekrit-token', target: { password: 'sekrit-password' }, rollup: 'r1' }, 'ready: hello');
  `;
  const argv = [process.execPath, '--input-type=module', '-e', script];
  const [file, args] = tty
    ? ['script', ['-qec', argv.map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' '), '/dev/null']]
    : [argv[0]!, argv.slice(1)];
  return new Promise((resolve, reject) => {
    execFile(file as string, args as string[], (error, stdout) => (error ? reject(error) : resolve(stdout)));
  });
}

describe('log format', () => {
  it('pretty: a readable line, the message first, secrets redacted', async () => {
    const out = await logOnce('pretty');
    expect(out).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: ready: hello \{.*"rollup":"r1".*\}\n$/);
    expect(out).not.toContain('sekrit');
    expect(out).toContain('[redacted]');
  });

  it('pretty and in colour by default at a terminal', async () => {
    const out = await logOnce('default', true);
    expect(out).toContain('\u001b[');
    expect(out.replaceAll(new RegExp(`${String.fromCharCode(27)}\\[\\d+m`, 'g'), '')).toMatch(
      /\] INFO: ready: hello \{/,
    );
    expect(out).not.toContain('sekrit');
  });

  it('json: one JSON object per line, secrets redacted; also the default when stdout is not a terminal', async () => {
    for (const format of ['json', 'default']) {
      const out = await logOnce(format);
      const line = JSON.parse(out);
      expect(line).toMatchObject({ level: 30, msg: 'ready: hello', rollup: 'r1', token: '[redacted]' });
      expect(out).not.toContain('sekrit');
    }
  });

  it('refuses a LOG_FORMAT it does not know, naming it', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, LOG_FORMAT: 'xml' };
    for (const key of CONFIG_ENV_VARS) if (key !== 'LOG_FORMAT') delete env[key];
    const run = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile(process.execPath, [DAEMON_ENTRY, 'start'], { env }, (error, _stdout, stderr) =>
        resolve({ code: typeof error?.code === 'number' ? error.code : 0, stderr }),
      ),
    );
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('log_format (from LOG_FORMAT)');
  });
});
