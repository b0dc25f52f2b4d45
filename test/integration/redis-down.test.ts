/**
 * Redis unreachable from the start: the daemon still answers its probes, says why it is not
 * ready, and a SIGTERM still shuts it down cleanly (the worker's graceful close would wait for a
 * connection that never comes), and the process ends when it says 'stopped'.
 */
import { expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/db.js';
import { processHarness } from '../helpers/process.js';

const procs = processHarness();
const db = await createTestDatabase();

it('answers /readyz with 503 and the reason, serves /metrics, and exits 0 on SIGTERM', async () => {
  const daemon = await procs.spawn({
    name: 'no-redis',
    config: {
      database_url: db.url,
      redis_url: 'redis://127.0.0.1:1', // nothing listens on port 1
      log_level: 'info',
      http: { host: '127.0.0.1', port: 0 },
      shutdown_timeout: 'PT20S',
    },
  });
  const ready = await fetch(`${daemon.url}/readyz`, { signal: AbortSignal.timeout(10_000) });
  expect(ready.status).toBe(503);
  expect(await ready.json()).toMatchObject({
    status: 'not_ready',
    postgres: 'ok',
    redis: expect.stringMatching(/^error: /),
  });
  const metrics = await fetch(`${daemon.url}/metrics`, { signal: AbortSignal.timeout(10_000) });
  expect(metrics.status).toBe(200);
  // Well inside shutdown_timeout: a graceful worker close would hang until it ran out.
  daemon.signal('SIGTERM');
  await daemon.waitForLog('stopped', { timeout: 10_000 });
  const stopped = Date.now();
  expect(await daemon.waitForExit(10_000)).toEqual({ code: 0, signal: null });
  // Closing a client between reconnect attempts waits for a socket that closed already: ioredis's
  // 2,000 ms by default held the process that long after 'stopped' (ours: 200 ms).
  expect(Date.now() - stopped).toBeLessThan(1_000);
});
