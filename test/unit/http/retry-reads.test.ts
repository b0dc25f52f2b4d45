import Fastify from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { retryReadsOnLostConnection } from '../../../src/http/retry-reads.js';

/**
 * A read whose pooled connections are stranded fails once per stranded connection it lands on:
 * each is given up (ECONNRESET) by the stale-connection watch, and the next try may land on
 * another. The read must be tried again until one answers, within the bound, not once.
 */
const lost = () => Object.assign(new Error('PostgreSQL connection went stale'), { code: 'ECONNRESET' });

let app: ReturnType<typeof Fastify> | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

/** A server whose GET /read and POST /write fail as `failures` says, then answer; `calls` counts tries. */
async function serve(withinMs: number, failures: (call: number) => Error | undefined) {
  const calls = { read: 0, write: 0 };
  app = Fastify();
  app.addHook('onRoute', retryReadsOnLostConnection(withinMs));
  app.get('/read', async () => {
    const error = failures(++calls.read);
    if (error) throw error;
    return { ratio: 1 };
  });
  app.post('/write', async () => {
    const error = failures(++calls.write);
    if (error) throw error;
    return { ok: true };
  });
  await app.ready();
  return { app, calls };
}

describe('reads on lost connections', () => {
  it('are tried again until a connection answers: three stranded in a row, then a fresh one', async () => {
    const { app, calls } = await serve(5_000, (call) => (call <= 3 ? lost() : undefined));
    const res = await app.inject({ url: '/read' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ ratio: 1 });
    expect(calls.read).toBe(4);
  });

  it('are tried again on every transient failure: a terminated backend, a destroyed connection', async () => {
    const codes = ['57P01', 'CONNECTION_DESTROYED', 'CONNECTION_CLOSED'];
    const { app, calls } = await serve(5_000, (call) =>
      call <= codes.length ? Object.assign(new Error(codes[call - 1]), { code: codes[call - 1] }) : undefined,
    );
    expect((await app.inject({ url: '/read' })).statusCode).toBe(200);
    expect(calls.read).toBe(4);
  });

  it('answer 500 once the bound has passed with every try failing', async () => {
    const { app, calls } = await serve(300, () => lost());
    const res = await app.inject({ url: '/read' });
    expect(res.statusCode).toBe(500);
    expect(calls.read).toBeGreaterThan(1);
  });

  it('are not tried again on an error that is not transient', async () => {
    const { app, calls } = await serve(5_000, () => new Error('a bug'));
    expect((await app.inject({ url: '/read' })).statusCode).toBe(500);
    expect(calls.read).toBe(1);
  });

  it('leave writes to their callers: a POST is tried once', async () => {
    const { app, calls } = await serve(5_000, (call) => (call === 1 ? lost() : undefined));
    expect((await app.inject({ method: 'POST', url: '/write' })).statusCode).toBe(500);
    expect(calls.write).toBe(1);
  });
});
