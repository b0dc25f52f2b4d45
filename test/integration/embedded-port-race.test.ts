/**
 * The embedded PostgreSQL's port taken between the check that it is free and the server binding
 * it: another server (an embedded one of another data directory, another test run's) starting at
 * the same moment. The server then exits ("could not create any TCP/IP sockets"), and the start
 * failed with it: under load, with several embedded starts side by side, one start in a few died
 * that way. The start must move to another port and come up there.
 *
 * The race is made, not hoped for: the server is stopped (SIGSTOP) the moment its process appears,
 * the port is taken, and the server resumed. When the server had bound the port already (it was
 * quicker than the stop), that try shows nothing and is made again.
 */
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { dataDir, readServerRecord } from '../../src/embedded/files.js';
import { ensureServer, stopServer } from '../../src/embedded/server.js';
import { createLogger } from '../../src/support/log.js';
import { LOADED_DEADLINE_MS, waitFor } from '../helpers/wait.js';

const root = mkdtempSync(join(tmpdir(), 'coverage-rollup-port-race-'));
chmodSync(root, 0o755); // run as root, the server runs as an unprivileged user that must reach it
const dir = dataDir(join(root, 'data'));
const lines: Array<{ msg: string; port?: number; was?: number }> = [];
const log = createLogger('info', {
  write: (line: string) => {
    lines.push(JSON.parse(line));
  },
});

afterAll(async () => {
  for (const pid of serverPids()) process.kill(pid, 'SIGQUIT');
  await waitFor(() => serverPids().length === 0, { what: 'the embedded server to stop' });
  rmSync(root, { recursive: true, force: true });
});

/** Pids of the PostgreSQL servers of this file's data directory. */
function serverPids(): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((pid) => {
      try {
        const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
        return argv[0]?.endsWith('/postgres') && argv.includes(dir.cluster);
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** Listens on the port, as the other server would; undefined when it is taken already. */
function take(port: number): Promise<Server | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(undefined));
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

describe.runIf(process.platform === 'linux')('the embedded PostgreSQL start', () => {
  it('moves to another port when its port is taken between the check and the bind', async () => {
    // A cluster to start again: made (initdb) and stopped once.
    const first = await ensureServer(dir, log);
    await stopServer(first.pid, log);

    for (let attempt = 1; ; attempt++) {
      const port = readServerRecord(dir)!.port;
      lines.length = 0;
      const starting = ensureServer(dir, log);
      starting.catch(() => {}); // awaited below
      const pid = await waitFor(() => serverPids()[0], {
        interval: 1,
        timeout: LOADED_DEADLINE_MS,
        what: 'the server process',
      });
      process.kill(pid, 'SIGSTOP');
      const taker = await take(port);
      process.kill(pid, 'SIGCONT');
      if (!taker) {
        // It bound the port before it was stopped: no race this time.
        await stopServer((await starting).pid, log);
        expect(attempt, 'the server was never stopped before it bound its port').toBeLessThan(10);
        continue;
      }
      try {
        // Without the move, this start fails: "the embedded PostgreSQL exited while starting".
        const server = await starting;
        expect(server.port).not.toBe(port);
        expect(readServerRecord(dir)!.port).toBe(server.port);
        expect(lines).toContainEqual(
          expect.objectContaining({
            msg: 'embedded PostgreSQL: its port was taken as it started (another server starting at the same moment); moving to another',
            was: port,
            port: server.port,
          }),
        );
        await stopServer(server.pid, log);
      } finally {
        await new Promise((resolve) => taker.close(resolve));
      }
      return;
    }
  }, 180_000);
});
