import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import { redisUrls } from '../core/connections/redis-url.js';
import type { Logger } from '../support/log.js';

/** A standalone Redis, or a Redis Cluster reached through its seed nodes. */
export type RedisClient = Redis | Cluster;

/**
 * Every Redis connection of the daemon, `emit`, health checks and targets comes from here.
 * BullMQ needs maxRetriesPerRequest: null so blocking commands survive reconnects (on Cluster,
 * in the per-node options, where BullMQ reads it).
 */
export function redisConnection(url: string): RedisClient {
  return connectTo(url, { maxRetriesPerRequest: null, enableReadyCheck: true });
}

/**
 * For one-shot producers (`emit`): gives up after a few connection attempts, so an unreachable
 * Redis fails the command with its error instead of queueing it forever.
 */
export function oneShotConnection(url: string): RedisClient {
  const retry = (attempt: number) => (attempt > 3 ? null : 250 * attempt);
  const redis = connectTo(
    url,
    { maxRetriesPerRequest: 2, connectTimeout: 5_000, retryStrategy: retry },
    { clusterRetryStrategy: retry },
  );
  redis.on('error', () => {}); // each command that fails reports it
  return redis;
}

/**
 * Closes a connection at once, and only once: ioredis's disconnect() of a connection that already
 * ended arms a 2 s timer for a close event that never comes again, which held the daemon's process
 * for 2 s after it logged "stopped".
 */
export function disconnect(redis: RedisClient): void {
  if (redis.status !== 'end') redis.disconnect();
}

/**
 * How long a closing connection waits for its socket's close before destroying it (ioredis: 2 s).
 * Closing a client that is between reconnect attempts (Redis down at shutdown) always waits it
 * out, since that socket closed already, so it held the process 2 s after "stopped".
 */
const DISCONNECT_TIMEOUT_MS = 200;

function connectTo(url: string, given: RedisOptions, clusterOptions: ClusterOptions = {}): RedisClient {
  const options: RedisOptions = { ...given, disconnectTimeout: DISCONNECT_TIMEOUT_MS };
  const urls = redisUrls(url);
  if (urls.length === 1) return new Redis(url, options);
  // Credentials and TLS are the cluster's, taken from the first seed; each seed gives a host:port.
  const first = new URL(urls[0]!);
  const redisOptions: RedisOptions = {
    ...options,
    ...(first.username ? { username: decodeURIComponent(first.username) } : {}),
    ...(first.password ? { password: decodeURIComponent(first.password) } : {}),
    ...(first.protocol === 'rediss:' ? { tls: {} } : {}),
  };
  const nodes = urls.map((u) => {
    const { hostname, port } = new URL(u);
    return { host: hostname, port: port === '' ? 6379 : Number(port) };
  });
  return new Cluster(nodes, { ...clusterOptions, redisOptions, enableReadyCheck: true });
}

/**
 * Redis that evicts keys under memory pressure silently loses queued events and job locks; BullMQ
 * requires `maxmemory-policy noeviction`. Checked on every node reachable; warns, never fails,
 * since managed services may refuse CONFIG.
 */
export async function warnUnlessNoEviction(redis: RedisClient, log: Logger): Promise<void> {
  // A Cluster client knows its nodes once ready (a standalone client queues the command instead).
  if (redis instanceof Cluster && redis.status !== 'ready') await new Promise((r) => redis.once('ready', r));
  const nodes: Redis[] = redis instanceof Cluster ? redis.nodes('all') : [redis];
  await Promise.all(
    nodes.map(async (node) => {
      const where = `${node.options.host}:${node.options.port}`;
      try {
        const answer = (await node.config('GET', 'maxmemory-policy')) as string[];
        const policy = answer[1];
        if (policy !== 'noeviction') {
          log.warn(
            { redis: where, maxmemory_policy: policy },
            'Redis maxmemory-policy is not noeviction: under memory pressure Redis may evict queued events and job locks; set maxmemory-policy noeviction',
          );
        }
      } catch (error) {
        log.warn(
          { redis: where, err: error },
          'could not read Redis maxmemory-policy (CONFIG GET refused?); make sure it is noeviction',
        );
      }
    }),
  );
}

/** Deletes every key under a BullMQ prefix (tests, the demo, benchmarks): SCAN, never KEYS. */
export async function deleteKeysWithPrefix(redis: RedisClient, prefix: string): Promise<void> {
  const nodes: Redis[] = redis instanceof Cluster ? redis.nodes('master') : [redis];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      // One at a time on Cluster: keys of different prefixes' slots may not share a DEL.
      if (keys.length > 0)
        await (redis instanceof Cluster ? Promise.all(keys.map((k) => node.del(k))) : node.del(...keys));
    } while (cursor !== '0');
  }
}
