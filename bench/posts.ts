/**
 * bench:posts: `POST /v1/events` into the built daemon on the embedded default (no URLs: its own
 * PostgreSQL, `queue.backend: postgres`), where each request answers after its events committed.
 * Single-event requests from 1, 8 and 32 clients at once, each client sending its next request
 * when the last one answered, for BENCH_SECONDS (10) each; then batches of BENCH_BATCH (1000)
 * events from 4 clients. Every event is a distinct 5-minute slice of one asset, so all requests
 * contend for the same asset, as producers of one stream do. Prints JSON: events/s, requests/s
 * and the latency of a request (p50, p99) per client count, and the load average.
 *
 *   npm run build && npm run bench:posts
 *   BENCH_CLIENTS=1,8,32 BENCH_SECONDS=10 npm run bench:posts
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { quantile, round, spawnDaemon } from './common.js';

const TOKEN = 'bench-posts-token-0123456789abcdef';
const FIVE_MINUTES = 5 * 60_000;

export interface PostRate {
  readonly clients: number;
  /** Events per request. */
  readonly batch: number;
  readonly requests: number;
  readonly events: number;
  readonly seconds: number;
  readonly events_per_second: number;
  readonly requests_per_second: number;
  readonly latency_ms: { readonly p50: number; readonly p99: number };
}

/**
 * Requests of `batch` events from `clients` loops at once for `seconds` (or `requests` in all),
 * each loop sending its next request when the last answered. `send` posts one request of the
 * events numbered from `first` and throws unless every one was accepted. Shared by the peers'
 * side of bench:peers, so both sides are driven alike.
 */
export async function closedLoop(
  options: {
    readonly clients: number;
    readonly batch: number;
    readonly seconds?: number;
    readonly requests?: number;
  },
  send: (first: number, count: number) => Promise<void>,
): Promise<PostRate> {
  const { clients, batch } = options;
  const until = performance.now() + (options.seconds ?? Number.POSITIVE_INFINITY) * 1000;
  const limit = options.requests ?? Number.POSITIVE_INFINITY;
  const latencies: number[] = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < until && next < limit) {
        const first = next++ * batch;
        const started = performance.now();
        await send(first, batch);
        latencies.push(performance.now() - started);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    clients,
    batch,
    requests: latencies.length,
    events: latencies.length * batch,
    seconds: round(seconds, 2),
    events_per_second: round((latencies.length * batch) / seconds, 1),
    requests_per_second: round(latencies.length / seconds, 1),
    latency_ms: {
      p50: round(quantile(latencies, 0.5) ?? 0, 1),
      p99: round(quantile(latencies, 0.99) ?? 0, 1),
    },
  };
}

/** The n-th 5-minute slice of `asset` from 2025-01-01, as an event with an id of its own. */
export function slice(asset: string, n: number): Record<string, string> {
  const start = Date.UTC(2025, 0, 1) + n * FIVE_MINUTES;
  return {
    asset,
    start: new Date(start).toISOString(),
    end: new Date(start + FIVE_MINUTES).toISOString(),
    id: `${asset}-${n}`,
  };
}

/** One closed loop of POST /v1/events against `url`, every event on `asset`. */
export function postEvents(
  url: string,
  token: string,
  asset: string,
  options: { readonly clients: number; readonly batch: number; readonly seconds?: number },
): Promise<PostRate> {
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` };
  return closedLoop(options, async (first, count) => {
    const events = Array.from({ length: count }, (_, i) => slice(asset, first + i));
    const res = await fetch(`${url}/v1/events`, {
      method: 'POST',
      headers,
      body: JSON.stringify(count === 1 ? events[0] : events),
    });
    const answer = (await res.json()) as { results?: Array<{ status: string }> };
    if (res.status !== 200 || answer.results?.some((r) => r.status !== 'committed'))
      throw new Error(`POST /v1/events answered ${res.status}: ${JSON.stringify(answer).slice(0, 300)}`);
  });
}

/** The built daemon as `npm start` runs it with no URLs, in a data directory of its own. */
export async function embeddedDaemon(token: string) {
  const dir = mkdtempSync(join(tmpdir(), 'crbench-posts-'));
  chmodSync(dir, 0o755); // run as root, the embedded server's user must reach it
  const daemon = await spawnDaemon(
    { data_dir: join(dir, 'data'), api_tokens: [token], http: { port: 0 }, rollups: [] },
    { compiled: true },
  );
  return {
    url: daemon.url,
    async stop() {
      await daemon.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function main(): Promise<void> {
  const clients = (process.env.BENCH_CLIENTS ?? '1,8,32').split(',').map(Number);
  const seconds = Number(process.env.BENCH_SECONDS ?? 10);
  const batch = Number(process.env.BENCH_BATCH ?? 1000);
  const load = [round(loadavg()[0]!, 2)];
  const daemon = await embeddedDaemon(TOKEN);
  const single: PostRate[] = [];
  let batches: PostRate;
  try {
    // A warm-up, so the first round does not pay for the asset's registration and cold caches.
    await postEvents(daemon.url, TOKEN, 'bench.posts.warm', { clients: 4, batch: 1, seconds: 2 });
    for (const n of clients) {
      single.push(
        await postEvents(daemon.url, TOKEN, `bench.posts.c${n}`, { clients: n, batch: 1, seconds }),
      );
      process.stderr.write(`${n} clients: ${JSON.stringify(single.at(-1))}\n`);
    }
    batches = await postEvents(daemon.url, TOKEN, 'bench.posts.batches', { clients: 4, batch, seconds });
  } finally {
    await daemon.stop();
  }
  load.push(round(loadavg()[0]!, 2));
  console.log(JSON.stringify({ bench: 'posts', single, batches, load_average_1m: load }, null, 2));
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
