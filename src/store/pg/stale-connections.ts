/**
 * Gives up pooled connections whose flow went stale: a NAT or firewall that lost the
 * flow, a fail-over behind a virtual address. Bytes are neither delivered nor refused, so the
 * operating system notices only after its TCP timeout (about 15 minutes) while new connections
 * work. Each pool socket is made here (postgres.js' `socket` option) and watched: requests sent
 * (Sync, Query) against ReadyForQuery answers received, and the time of the last byte. A socket
 * that owes answers and has heard nothing for half the bound is checked on a fresh connection in
 * pg_stat_activity: a backend that is gone, or idle (it never got our request, or its answer was
 * lost), or blocked writing to us, is a stale flow. Its socket is destroyed (the statement fails
 * with ECONNRESET, which every caller retries on a fresh connection) and its backend terminated,
 * so the locks it held are released at once. A backend still working or waiting on a lock is left
 * alone. When the fresh connection does not answer either, PostgreSQL is cut off as a whole, which
 * the ingest's cut-off guard handles (src/ingest/pg-stall.ts).
 *
 * An idle socket owes nothing, so a stale one would only be found when a statement is sent on it,
 * and a LISTEN connection never sends one: it would just stop hearing notifications. So a socket
 * quiet for half the bound between requests is sent a Sync of ours (harmless outside an extended
 * query: the server only answers ReadyForQuery, which is taken out of the stream before
 * postgres.js reads it), and then owes an answer like any other.
 */
import { once } from 'node:events';
import { connect as netConnect, type Socket } from 'node:net';
import type { Logger } from '../../support/log.js';
import { FrameReader } from './pg-frames.js';

interface Watched {
  readonly socket: Socket;
  pid: number | undefined;
  /** Requests that owe a ReadyForQuery: the startup, each Sync and each simple Query. */
  owed: number;
  /**
   * A Flush was sent and nothing heard since: postgres.js describes a new statement that way
   * (Parse, Describe, Flush) and waits for the description before it sends the rest and a Sync.
   */
  flushed: boolean;
  /** Extended-query messages sent since the last Sync (a describe or a cursor waiting): no ping. */
  extended: boolean;
  /** Our Sync is owed its ReadyForQuery, which postgres.js must not see. */
  pinged: boolean;
  /** When the socket last received a byte, or began to owe one after owing none. */
  quietSince: number;
  readonly rx: FrameReader;
  readonly tx: FrameReader;
}

const SYNC = Buffer.from([0x53, 0, 0, 0, 4]);

/** pg_stat_activity's state and wait event type of each of these backends, on a fresh connection. */
export type StaleCheck = (
  pids: readonly number[],
  timeoutMs: number,
) => Promise<Map<number, { state: string | null; wait: string | null }> | null>;

export interface StaleWatchOptions {
  /** A statement unanswered this long, on a backend that is not working on it, is given up. */
  readonly boundMs: number;
  readonly check: StaleCheck;
  /** Ends the backends of the connections given up (pg_terminate_backend), best effort. */
  readonly terminate: (pids: readonly number[]) => Promise<void>;
  readonly log: Logger;
  readonly onStale?: (count: number) => void;
  /** Ends what check and terminate keep open. */
  readonly close?: () => Promise<void>;
}

/** Whether the socket waits on the server: a ReadyForQuery, or any answer to a Flush. */
const owes = (w: Watched) => w.owed > 0 || w.flushed;

/** Extended-query messages: Parse, Bind, Describe, Execute, Close, Flush. */
const EXTENDED = new Set([0x50, 0x42, 0x44, 0x45, 0x43, 0x48]);

/** Backend states that wait on the client: a statement this socket owes an answer to is lost. */
const WAITING_ON_CLIENT = new Set(['idle', 'idle in transaction', 'idle in transaction (aborted)']);

export class StaleConnectionWatch {
  private readonly sockets = new Set<Watched>();
  private timer: NodeJS.Timeout | undefined;
  private checking = false;

  constructor(private readonly options: StaleWatchOptions) {}

  /** For postgres.js' `socket` option: a connected socket, watched until it closes. */
  readonly socket = async (options: { host: string[]; port: number[]; path?: string | false }) => {
    const socket = options.path ? netConnect(options.path) : netConnect(options.port[0]!, options.host[0]!);
    await once(socket, 'connect');
    const watched: Watched = {
      socket,
      pid: undefined,
      owed: 1,
      flushed: false,
      extended: false,
      pinged: false,
      quietSince: Date.now(),
      rx: new FrameReader(true, (type, body) => {
        if (type === 0x4b && body.length >= 4) watched.pid = body.readUInt32BE(0); // K: BackendKeyData
        if (type !== 0x5a) return true; // Z: ReadyForQuery
        watched.owed = Math.max(0, watched.owed - 1);
        // A ping is sent only when nothing else is owed, so the first answer after it is its own.
        if (!watched.pinged) return true;
        watched.pinged = false;
        return false;
      }),
      tx: new FrameReader(false, (type) => {
        if (type === 0x53 || type === 0x51 || type === 0x48) {
          // S: Sync, Q: Query, H: Flush
          if (!owes(watched)) watched.quietSince = Date.now();
          if (type === 0x48) watched.flushed = true;
          else watched.owed++;
        }
        if (type === 0x53 || type === 0x51) watched.extended = false;
        else if (EXTENDED.has(type)) watched.extended = true;
        return true;
      }),
    };
    const emit = socket.emit.bind(socket) as (event: string | symbol, ...args: unknown[]) => boolean;
    socket.emit = ((event: string | symbol, ...args: unknown[]) => {
      if (event !== 'data' || watched.tx.opaque) return emit(event, ...args);
      watched.quietSince = Date.now();
      watched.flushed = false;
      const passed = watched.rx.push(args[0] as Buffer);
      return passed.length === 0 || emit('data', passed);
    }) as Socket['emit'];
    const write = socket.write.bind(socket);
    socket.write = ((chunk: unknown, ...rest: unknown[]) => {
      if (Buffer.isBuffer(chunk)) watched.tx.push(chunk);
      else if (typeof chunk === 'string') watched.tx.push(Buffer.from(chunk));
      return (write as (...args: unknown[]) => boolean)(chunk, ...rest);
    }) as Socket['write'];
    socket.once('close', () => this.sockets.delete(watched));
    this.sockets.add(watched);
    this.start();
    return socket;
  };

  start(): void {
    if (this.timer) return;
    const tick = Math.min(1000, Math.max(50, this.options.boundMs / 4));
    this.timer = setInterval(() => void this.sweep(), tick);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Stops watching and ends the check connection: with the pool it watches, when that ends. */
  async close(): Promise<void> {
    this.stop();
    await this.options.close?.();
  }

  /**
   * Pings the sockets quiet for half the bound between requests; checks those quiet for half the
   * bound while owing answers and gives up the stale ones.
   */
  async sweep(now = Date.now()): Promise<number> {
    if (this.checking) return 0;
    const half = this.options.boundMs / 2;
    for (const w of this.sockets) {
      if (owes(w) || w.extended || w.pid === undefined || w.tx.opaque || !w.socket.writable) continue;
      if (now - w.quietSince < half) continue;
      w.pinged = true;
      w.socket.write(SYNC);
    }
    const suspects = [...this.sockets].filter(
      (w) =>
        owes(w) && w.pid !== undefined && !w.tx.opaque && now - w.quietSince >= half && !w.socket.destroyed,
    );
    if (suspects.length === 0) return 0;
    this.checking = true;
    try {
      const states = await this.options.check(
        suspects.map((w) => w.pid!),
        half,
      );
      if (states === null) return 0; // no fresh connection either: the cut-off guard's case
      const stale = suspects.filter((w) => {
        if (now - w.quietSince < half || !owes(w)) return false;
        const s = states.get(w.pid!);
        return s === undefined || WAITING_ON_CLIENT.has(s.state ?? '') || s.wait === 'Client';
      });
      const kept = suspects.filter((w) => !stale.includes(w));
      if (kept.length > 0) {
        this.options.log.debug(
          {
            suspects: kept.map((w) => ({
              pid: w.pid,
              owed: w.owed,
              flushed: w.flushed,
              ...states.get(w.pid!),
            })),
          },
          'quiet PostgreSQL connections whose backends are working: left alone',
        );
      }
      if (stale.length === 0) return 0;
      for (const w of stale) {
        const error = Object.assign(
          new Error('PostgreSQL connection went stale (no answer, backend not working on it)'),
          {
            code: 'ECONNRESET',
          },
        );
        w.socket.destroy(error);
      }
      this.options.onStale?.(stale.length);
      this.options.log.warn(
        { connections: stale.length, pids: stale.map((w) => w.pid), bound_ms: this.options.boundMs },
        'stale PostgreSQL connections given up (no answer while a fresh connection answers); their work is retried',
      );
      await this.options.terminate(stale.map((w) => w.pid!)).catch(() => {});
      return stale.length;
    } catch {
      return 0;
    } finally {
      this.checking = false;
    }
  }
}

/**
 * How long the check connection may take to start a session before it counts as stranded itself.
 * A loaded server takes seconds to start one: a connection dropped each time it had not answered
 * within half the bound was never up by the next check, and the watch gave nothing up at all
 * (seen at load 26 on 2 cores: stranded sockets owing answers for 9 s under a 1 s bound).
 */
const CHECK_CONNECT_MS = 10_000;

/**
 * The check and terminate of StaleWatchOptions, on a connection of their own: opened when first
 * needed and kept while it answers (a new connection costs more than the check on a busy host).
 * One that answered before and now does not answer in time, or fails, is replaced by a new one,
 * which is also what makes it fresh again after a cut that stranded it; one still starting its
 * session is kept (that check counts as unanswered) for up to CHECK_CONNECT_MS.
 */
export function freshConnectionChecks(
  url: string,
  connectOnce: (url: string, options: { connect_timeout: number }) => import('postgres').Sql,
): Pick<StaleWatchOptions, 'check' | 'terminate' | 'close'> {
  let checker: { sql: import('postgres').Sql; since: number; answered: boolean } | undefined;
  let closed = false;
  const withChecker = async <T>(
    timeoutMs: number,
    run: (sql: import('postgres').Sql) => Promise<T>,
  ): Promise<T | null> => {
    if (closed) return null; // a sweep still running as the pool ends opens nothing new
    checker ??= {
      sql: connectOnce(url, { connect_timeout: CHECK_CONNECT_MS / 1000 }),
      since: Date.now(),
      answered: false,
    };
    const current = checker;
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      run(current.sql).then(
        (value) => ({ value }),
        () => 'failed' as const,
      ),
      new Promise<'late'>((resolve) => {
        timer = setTimeout(() => resolve('late'), timeoutMs);
      }),
    ]);
    clearTimeout(timer);
    if (typeof outcome === 'object') {
      current.answered = true;
      return outcome.value;
    }
    const starting = outcome === 'late' && !current.answered && Date.now() - current.since < CHECK_CONNECT_MS;
    if (!starting) {
      if (checker === current) checker = undefined;
      void current.sql.end({ timeout: 0 }).catch(() => {});
    }
    return null;
  };
  return {
    check: (pids, timeoutMs) =>
      withChecker(timeoutMs, async (sql) => {
        const rows = await sql<{ pid: number; state: string | null; wait: string | null }[]>`
          select pid, state, wait_event_type as wait from pg_stat_activity where pid = any(${pids as number[]}::int4[])`;
        return new Map(rows.map((r) => [r.pid, { state: r.state, wait: r.wait }]));
      }),
    terminate: async (pids) => {
      await withChecker(
        5000,
        (sql) => sql`select pg_terminate_backend(pid) from unnest(${pids as number[]}::int4[]) as pid`,
      );
    },
    close: async () => {
      closed = true;
      const sql = checker?.sql;
      checker = undefined;
      await sql?.end({ timeout: 0 }).catch(() => {});
    },
  };
}
