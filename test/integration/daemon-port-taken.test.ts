/**
 * A daemon whose HTTP port is taken says so, and which setting moves it, instead of Node's bare
 * `listen EADDRINUSE`; it stops what it had started (nothing is left behind for the next start).
 */
import { createServer } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { startDaemon } from '../../src/daemon/daemon.js';
import { createLogger } from '../../src/support/log.js';
import { testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';

const db = await createTestDatabase();
const prefix = createTestPrefix();

describe('a taken HTTP port', () => {
  it('fails the start with a message that names the port and PORT / http.port', async () => {
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(0, '127.0.0.1', resolve));
    afterAll(() => new Promise<void>((resolve) => squatter.close(() => resolve())));
    const { port } = squatter.address() as { port: number };

    const config = testConfig(db, prefix, { http: { host: '127.0.0.1', port } });
    const started = startDaemon(config, createLogger('silent'));
    await expect(started).rejects.toThrow(
      `cannot listen on 127.0.0.1:${port}: the port is already in use (another coverage-rollup, or another program): start it on another port with PORT=<port> (or http.port in its config; 0 picks a free port)`,
    );
  });
});
