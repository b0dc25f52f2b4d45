import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';

/**
 * Sees every chunk a client sends, in order from its first byte (one watcher per connection, so
 * it can keep protocol state); true marks a chunk at which an armed cutAtWatched() cuts, a number
 * a byte offset inside it: the bytes before it are forwarded, the rest waits with the cut (so a
 * cut can fall between two protocol messages sent in one write).
 */
export type ChunkWatcher = (chunk: Buffer) => boolean | number;

/**
 * A TCP proxy that can be cut like a network partition without resets: blackhole() stops
 * forwarding bytes both ways (each side's reads pause, so data waits in socket buffers as in TCP
 * retransmission), new connections are accepted but not forwarded, and nothing is closed or reset.
 * heal() forwards everything that waited, then carries on; a side that closed meanwhile is closed
 * on the other side only then. With a watcher, cutAtWatched() cuts at a precise moment: just
 * before the first chunk the watcher marks, which waits for the heal like the rest.
 */
export class BlackholeProxy {
  private readonly pairs = new Set<{ client: Socket; upstream: Socket | undefined; stale?: boolean }>();
  private holes = false;
  private readonly onHeal = new Set<() => void>();
  /** Marked chunks held at a cut, written before anything else at the heal. */
  private readonly held: Array<() => void> = [];
  private armed: (() => void) | undefined;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly watcher: (() => ChunkWatcher) | undefined,
  ) {}

  static async start(
    target: { host: string; port: number },
    { watch }: { watch?: () => ChunkWatcher } = {},
  ): Promise<BlackholeProxy> {
    const server = createServer({ pauseOnConnect: true });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', resolve);
    });
    const address = server.address();
    const proxy = new BlackholeProxy(
      server,
      typeof address === 'object' && address ? address.port : 0,
      watch,
    );
    server.on('connection', (client) => proxy.accept(client, target));
    return proxy;
  }

  /** `url` with its host and port replaced by the proxy's. */
  proxiedUrl(url: string): string {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }

  blackhole(): void {
    this.holes = true;
    for (const { client, upstream } of this.pairs) {
      client.pause();
      upstream?.pause();
    }
  }

  /**
   * Stale flows: the connections open now stop forwarding both ways (as blackhole() does, their
   * ends and resets wait too), while new connections are accepted and forwarded as usual: a NAT
   * or firewall that lost its existing flows, a fail-over behind a virtual address. heal() resumes them.
   */
  staleExisting(): number {
    for (const pair of this.pairs) {
      pair.stale = true;
      pair.client.pause();
      pair.upstream?.pause();
    }
    return this.pairs.size;
  }

  /**
   * Blackholes at the next client chunk the watcher marks, before forwarding it; resolves then.
   * Needs the `watch` option of start().
   */
  cutAtWatched(): Promise<void> {
    if (!this.watcher) throw new Error('cutAtWatched() needs a proxy started with a watcher');
    return new Promise((resolve) => {
      this.armed = resolve;
    });
  }

  heal(): void {
    this.holes = false;
    for (const write of this.held.splice(0)) write();
    for (const pair of this.pairs) {
      pair.stale = false;
      if (!pair.upstream) continue; // its deferred connect below resumes it, once it has somewhere to go
      pair.client.resume();
      pair.upstream.resume();
    }
    const deferred = [...this.onHeal];
    this.onHeal.clear();
    for (const run of deferred) run();
  }

  async close(): Promise<void> {
    for (const { client, upstream } of this.pairs) {
      client.destroy();
      upstream?.destroy();
    }
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket, target: { host: string; port: number }): void {
    const pair: { client: Socket; upstream: Socket | undefined; stale?: boolean } = {
      client,
      upstream: undefined,
    };
    this.pairs.add(pair);
    const whenOpen = (run: () => void) => {
      if (this.holes || pair.stale) this.onHeal.add(run);
      else run();
    };
    const watch = this.watcher?.();
    /** Copies `from` to `to`; an end or reset of `from` reaches `to` only while not blackholed. */
    const relay = (from: Socket, to: Socket, watched?: ChunkWatcher) => {
      from.on('data', (chunk: Buffer) => {
        const cut = this.armed;
        const mark = watched?.(chunk) ?? false;
        if (mark !== false && cut) {
          this.armed = undefined;
          const at = mark === true ? 0 : Math.max(0, Math.min(chunk.length, mark));
          if (at > 0) to.write(chunk.subarray(0, at));
          this.blackhole();
          this.held.push(() => to.write(chunk.subarray(at)));
          cut();
          return;
        }
        to.write(chunk);
      });
      from.on('end', () => whenOpen(() => to.end()));
      from.on('close', (hadError) => {
        if (hadError) whenOpen(() => to.destroy());
      });
    };
    client.on('error', () => {});
    client.on('close', () => {
      if (!pair.upstream || pair.upstream.destroyed) this.pairs.delete(pair);
    });
    // While blackholed, even the connection to the target waits (a SYN that gets no answer).
    whenOpen(() => {
      if (client.destroyed) return;
      const upstream = tcpConnect(target.port, target.host);
      pair.upstream = upstream;
      upstream.on('error', () => {});
      upstream.on('close', () => {
        if (client.destroyed) this.pairs.delete(pair);
      });
      relay(client, upstream, watch);
      relay(upstream, client);
      if (this.holes) upstream.pause();
      else client.resume();
    });
  }
}
