/**
 * The stale-connection watch asks pg_stat_activity on a check connection of its own, each check
 * bounded by half of pg_stall_timeout. On a loaded server a new session takes longer than that to
 * start; the check connection was dropped at each unanswered check and a new one opened, which
 * again was not up in time, so no check ever answered and no stranded connection was ever given
 * up (reads and commits on them waited for the heal). A connection still starting is kept.
 *
 * The slow start is made by a proxy that holds each new connection for START_MS before it
 * reaches PostgreSQL, longer than a check may take.
 */
import { createServer, type Socket, connect as tcpConnect } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { connectOnce } from '../../src/store/pg/db.js';
import { freshConnectionChecks } from '../../src/store/pg/stale-connections.js';
import { createTestDatabase } from '../helpers/db.js';

const START_MS = 600;
const CHECK_MS = 200;

const db = await createTestDatabase();
const target = new URL(db.url);
let connections = 0;
const sockets = new Set<Socket>();
const proxy = createServer((client) => {
  connections++;
  sockets.add(client);
  client.pause();
  setTimeout(() => {
    const upstream = tcpConnect(Number(target.port || 5432), target.hostname);
    sockets.add(upstream);
    for (const s of [client, upstream]) s.on('error', () => {});
    client.pipe(upstream).pipe(client);
    client.resume();
  }, START_MS);
});
await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
const slowUrl = new URL(db.url);
slowUrl.hostname = '127.0.0.1';
slowUrl.port = String((proxy.address() as { port: number }).port);

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((resolve) => proxy.close(resolve));
});

describe('the stale watch check connection', () => {
  it('is kept while its session starts, so checks answer on a server slower to start one than a check may take', async () => {
    const checks = freshConnectionChecks(slowUrl.toString(), connectOnce);
    try {
      const [{ pid }] = await db.sql<[{ pid: number }]>`select pg_backend_pid() as pid`;
      let answer: Awaited<ReturnType<typeof checks.check>> = null;
      // Each check is bounded by CHECK_MS; the session is up after START_MS and then answers.
      for (let tries = 0; answer === null && tries < 50; tries++)
        answer = await checks.check([pid], CHECK_MS);
      expect(answer?.get(pid)).toMatchObject({ state: expect.any(String) });
      expect(connections).toBe(1);
    } finally {
      await checks.close?.();
    }
  });
});
