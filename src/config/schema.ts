import { z } from 'zod';
import { hasHashTag } from '../core/connections/hash-tag.js';
import { isClusterUrl, redisUrls } from '../core/connections/redis-url.js';
import { graphProblems } from '../core/rollups/graph.js';
import { DEFAULT_DATA_DIR } from '../support/daemon-record.js';
import { isoDuration, nonEmpty, postgresUrl, queueName, zone } from '../support/fields.js';
import { LOG_FORMATS } from '../support/log.js';
import { rollupSchema } from './rollup-schema.js';
import { scopedTokenSchema } from './token-schema.js';

/**
 * One schema, one defaults object. Precedence (lowest first): defaults, the YAML file
 * (--config or COVERAGE_ROLLUP_CONFIG), environment overrides (DATABASE_URL, DATABASE_READ_URL,
 * REDIS_URL, QUEUE_BACKEND, COVERAGE_ROLLUP_DATA_DIR, PORT, HTTP_HOST, LOG_LEVEL, LOG_FORMAT, API_TOKENS). A bad value is
 * an error naming the field, never a silent fallback.
 */

/**
 * `database_url` when neither it nor `redis_url` is set: the PostgreSQL server the
 * daemon runs itself in `data_dir`. The CLI swaps it for the server's real URL before connecting
 * (embedded/resolve.ts); writing it in a config file asks for the same.
 */
export const EMBEDDED_DATABASE = 'embedded';
/** The local PostgreSQL the daemon expects when only a Redis URL is given. */
export const LOCAL_DATABASE_URL = 'postgres://127.0.0.1:5432/coverage_rollup';

export const QUEUE_BACKENDS = ['redis', 'postgres'] as const;
export type QueueBackendKind = (typeof QUEUE_BACKENDS)[number];

/**
 * The defaults that depend on what else is set: with neither URL, the embedded database; with no
 * `queue.backend`, Redis when a Redis URL is set, else PostgreSQL; with the embedded
 * database and no `http.host`, this machine only (127.0.0.1): a daemon someone tries out is not
 * reachable from the network until they say so. A deployment (a database URL given) keeps
 * 0.0.0.0, which a container's published port needs.
 */
function defaultsFromPresence(raw: unknown): unknown {
  if (!isObject(raw)) return raw;
  const out: Record<string, unknown> = { ...raw };
  const redisGiven = out.redis_url !== undefined;
  out.database_url ??= redisGiven ? LOCAL_DATABASE_URL : EMBEDDED_DATABASE;
  const queue = out.queue;
  if (queue === undefined || isObject(queue)) {
    out.queue = { ...queue, backend: queue?.backend ?? (redisGiven ? 'redis' : 'postgres') };
  }
  const http = out.http;
  if (out.database_url === EMBEDDED_DATABASE && (http === undefined || isObject(http)))
    out.http = { ...http, host: http?.host ?? LOOPBACK };
  return out;
}

const LOOPBACK = '127.0.0.1';

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

const DAY_MS = 86_400_000;

const assetSchema = z.strictObject({
  name: nonEmpty,
  domain: z.enum(['time', 'integer']).optional(),
  zone: zone.default('UTC'),
  // How far behind now the asset's complete coverage may fall (integer assets: how long without an event).
  freshness: z
    .strictObject({
      max_lag: isoDuration.refine((ms) => ms > 0, {
        message: 'expected a duration longer than zero, such as PT20M',
      }),
    })
    .optional(),
});

const configObject = z
  .strictObject({
    database_url: z.union([postgresUrl, z.literal(EMBEDDED_DATABASE)]),
    // Where the embedded PostgreSQL keeps its cluster (and its queues), relative to the working
    // directory; used only when database_url is the embedded one.
    data_dir: nonEmpty.default(DEFAULT_DATA_DIR),
    // A streaming replica of database_url that serves coverage answers, listings and the status
    // page (docs/operations.md "A read replica"); unset, every read goes to database_url.
    database_read_url: postgresUrl.optional(),
    // Reads go back to the primary while the replica lags more than this (or cannot say how much).
    database_read_max_lag: isoDuration
      .refine((ms) => ms >= 1000, 'must be at least PT1S (the lag is measured every 250 ms)')
      .default(5_000),
    // Several comma-separated URLs are the seed nodes of a Redis Cluster.
    redis_url: z
      .string()
      .refine((v) => redisUrls(v).every((u) => /^rediss?:\/\/./.test(u) && URL.canParse(u)), {
        message:
          'expected a redis:// or rediss:// URL, or several comma-separated ones for Redis Cluster seed nodes',
      })
      .default('redis://127.0.0.1:6379'),
    log_level: z
      .preprocess(
        (v) => (typeof v === 'string' ? v.toLowerCase() : v),
        z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
      )
      .default('info'),
    // json or pretty; unset: pretty at a terminal, JSON otherwise (support/log.ts).
    log_format: z.enum(LOG_FORMATS).optional(),
    http: z
      .strictObject({
        host: nonEmpty.default('0.0.0.0'),
        port: z.number().int().min(0).max(65535).default(8080),
        body_limit: z.number().int().positive().default(1_048_576),
        // Coverage requests held open by `wait=` at once on this instance; more answer 503 at once.
        max_waiters: z.number().int().min(0).max(100_000).default(1000),
        // The longest `wait=` a coverage request may ask for.
        max_wait: isoDuration
          .refine((ms) => ms >= 1000 && ms <= 3_600_000, 'must be from PT1S to PT1H')
          .default(900_000),
      })
      .default({ host: '0.0.0.0', port: 8080, body_limit: 1_048_576, max_waiters: 1000, max_wait: 900_000 }),
    api_tokens: z.array(z.string().min(16, 'tokens must be at least 16 characters')).default([]),
    read_tokens: z.array(z.string().min(16, 'tokens must be at least 16 characters')).default([]),
    // Named tokens with scopes (docs/configuration.md "Tokens"), beside api_tokens and read_tokens.
    tokens: z.array(scopedTokenSchema).default([]),
    metrics: z
      .strictObject({
        // With read_tokens or tokens set, /metrics and /readyz's detail need a read token unless this.
        public: z.boolean().default(false),
      })
      .default({ public: false }),
    queue: z
      .strictObject({
        // Where BullMQ keeps the queues: Redis (redis_url) or PostgreSQL (database_url, one schema
        // per prefix). Filled from what is set before parsing (defaultsFromPresence).
        backend: z.enum(QUEUE_BACKENDS),
        name: queueName.default('asset-events'),
        dead_letter: queueName.default('asset-events-dead'),
        prefix: nonEmpty.default('bull'),
        // The events queue spread over this many queues, one hash-tagged prefix each (queue/groups.ts).
        groups: z.number().int().min(1).max(1024).default(1),
        // [] ingests nothing: an instance that only serves HTTP (reads, e.g. from a replica) or schedules.
        consume: z.array(z.number().int().min(0)).optional(),
        concurrency: z.number().int().min(1).max(10_000).default(1000),
        max_payload_bytes: z.number().int().min(256).default(65_536),
        batch_size: z.number().int().min(1).max(10_000).default(500),
        batch_wait: isoDuration.default(5),
        max_stalled_count: z.number().int().min(1).default(100),
        // Cut off from PostgreSQL this long (a commit and a probe unanswered): pause, give jobs back.
        pg_stall_timeout: isoDuration
          .refine((ms) => ms >= 200, { message: 'must be at least PT0.2S' })
          .default(5_000),
        // How often the failed sets are reconciled with the event log (ingest/failed-reconcile.ts).
        reconcile_every: isoDuration
          .refine((ms) => ms >= 100, { message: 'must be at least PT0.1S' })
          .default(60_000),
      })
      .default({
        backend: 'postgres',
        name: 'asset-events',
        dead_letter: 'asset-events-dead',
        prefix: 'bull',
        groups: 1,
        concurrency: 1000,
        max_payload_bytes: 65_536,
        batch_size: 500,
        batch_wait: 5,
        max_stalled_count: 100,
        pg_stall_timeout: 5_000,
        reconcile_every: 60_000,
      }),
    assets: z.array(assetSchema).default([]),
    lease: z
      .strictObject({
        name: nonEmpty.default('scheduler'),
        ttl: isoDuration.default(15_000),
        renew_every: isoDuration.default(5_000),
        retry_every: isoDuration.default(2_000),
      })
      .default({ name: 'scheduler', ttl: 15_000, renew_every: 5_000, retry_every: 2_000 }),
    scheduler: z
      .strictObject({
        enabled: z.boolean().default(true),
        dispatch_concurrency: z.number().int().min(1).default(16),
        // How often queue and airflow targets are asked about each open run (docs/rollups.md "Runs").
        run_check_every: isoDuration.refine((ms) => ms >= 100, 'must be at least PT0.1S').default(2000),
      })
      .default({ enabled: true, dispatch_concurrency: 16, run_check_every: 2000 }),
    retention: z
      .strictObject({
        // How long the event log is kept; see docs/operations.md "Retention".
        events: isoDuration
          .refine((ms) => ms > 0, 'must be longer than zero (e.g. P30D)')
          .default(30 * DAY_MS),
        // Delivered triggers older than this lose their stored payload and target; null keeps all.
        history: isoDuration.nullable().default(null),
        partition: isoDuration
          .refine((ms) => ms >= 1000 && ms % 1000 === 0, 'must be a whole number of seconds, at least PT1S')
          .default(DAY_MS),
        prune_every: isoDuration.refine((ms) => ms >= 1000, 'must be at least PT1S').default(5 * 60_000),
      })
      .default({ events: 30 * DAY_MS, history: null, partition: DAY_MS, prune_every: 5 * 60_000 }),
    shutdown_timeout: isoDuration.default(30_000),
    rollups: z.array(rollupSchema).default([]),
  })
  // The checks across fields run even where another part of the file failed, as long as the parts
  // each reads are valid, so one run reports every error (zod skips them on any issue otherwise).
  .superRefine((config, ctx) => {
    const { ttl, renew_every } = config.lease;
    if (renew_every * 2 > ttl) {
      ctx.addIssue({
        code: 'custom',
        path: ['lease', 'renew_every'],
        message: 'must be at most half of lease.ttl',
      });
    }
  }, readsOnly('lease'))
  // Written for a value that may hold invalid parts, so it runs whatever else failed.
  .superRefine(
    (config, ctx) => {
      duplicates(config.rollups, 'id').forEach((i) => {
        const id = (config.rollups[i] as { id: string }).id;
        ctx.addIssue({ code: 'custom', path: ['rollups', i, 'id'], message: `duplicate id ${id}` });
      });
      duplicates(config.assets, 'name').forEach((i) => {
        const name = (config.assets[i] as { name: string }).name;
        ctx.addIssue({ code: 'custom', path: ['assets', i, 'name'], message: `duplicate ${name}` });
      });
      duplicates(config.tokens, 'name').forEach((i) => {
        const name = (config.tokens[i] as { name: string }).name;
        ctx.addIssue({ code: 'custom', path: ['tokens', i, 'name'], message: `duplicate name ${name}` });
      });
      // Two names for one token: the audit could not say which one wrote.
      const envs = Array.isArray(config.tokens)
        ? config.tokens.map((t) => (t as { token?: { env?: unknown } } | null)?.token?.env)
        : [];
      duplicates(
        envs.map((env) => ({ env })),
        'env',
      ).forEach((i) => {
        ctx.addIssue({
          code: 'custom',
          path: ['tokens', i, 'token', 'env'],
          message: `${String(envs[i])} is already the token of another entry: each token is one name`,
        });
      });
    },
    { when: () => true },
  )
  .superRefine((config, ctx) => {
    for (const p of graphProblems(config.rollups))
      ctx.addIssue({ code: 'custom', path: ['rollups', p.index, p.field], message: p.message });
  }, readsOnly('rollups'))
  .superRefine((config, ctx) => checkQueueGroups(config, ctx), readsOnly('queue', 'redis_url', 'rollups'));

export const configSchema = z.preprocess(defaultsFromPresence, configObject);

type Payload = z.core.ParsePayload;

/** A check that runs unless one of these top-level fields failed (it reads only them). */
function readsOnly(...fields: string[]): { when: (payload: Payload) => boolean } {
  return { when: (payload) => !payload.issues.some((issue) => fields.includes(String(issue.path?.[0]))) };
}

/** Indices of the entries whose `key` (a string) repeats an earlier entry's; anything else is skipped. */
function duplicates(entries: unknown, key: string): number[] {
  if (!Array.isArray(entries)) return [];
  const seen = new Set<string>();
  return entries.flatMap((entry, i) => {
    const value =
      entry !== null && typeof entry === 'object' ? (entry as Record<string, unknown>)[key] : undefined;
    if (typeof value !== 'string') return [];
    if (seen.has(value)) return [i];
    seen.add(value);
    return [];
  });
}

export type Config = z.output<typeof configObject>;

/** Groups and Cluster: mistakes that would otherwise surface as CROSSSLOT errors or idle queues. */
function checkQueueGroups(config: Config, ctx: z.RefinementCtx): void {
  const { groups, consume, prefix } = config.queue;
  consume?.forEach((index, i) => {
    if (index >= groups) {
      ctx.addIssue({
        code: 'custom',
        path: ['queue', 'consume', i],
        message: `group ${index} does not exist: groups are 0 to ${groups - 1} (queue.groups: ${groups})`,
      });
    } else if (consume.indexOf(index) !== i) {
      ctx.addIssue({ code: 'custom', path: ['queue', 'consume', i], message: `group ${index} listed twice` });
    }
  });
  if (groups > 1 && /[{}]/.test(prefix)) {
    ctx.addIssue({
      code: 'custom',
      path: ['queue', 'prefix'],
      message: `with queue.groups > 1 the prefix must not contain braces: each group's prefix is {${prefix}-<group>}`,
    });
  }
  if (!isClusterUrl(config.redis_url)) return;
  if (config.queue.backend === 'postgres') {
    ctx.addIssue({
      code: 'custom',
      path: ['queue', 'backend'],
      message:
        'Redis Cluster (several comma-separated redis_url seeds) works only with queue.backend: redis; set queue.backend: redis (QUEUE_BACKEND=redis) or give one Redis URL',
    });
    return;
  }
  // Every key of one BullMQ queue must live in one slot, which only a hash tag in the prefix ensures.
  if (groups === 1 && !hasHashTag(prefix)) {
    ctx.addIssue({
      code: 'custom',
      path: ['queue', 'prefix'],
      message: `on Redis Cluster the prefix needs a hash tag, e.g. "{${prefix}}" (or set queue.groups > 1)`,
    });
  }
  config.rollups.forEach((r, i) => {
    if (r.target.type !== 'queue') return;
    const targetPrefix = r.target.prefix ?? prefix;
    if (!hasHashTag(targetPrefix)) {
      ctx.addIssue({
        code: 'custom',
        path: ['rollups', i, 'target', 'prefix'],
        message: `on Redis Cluster a queue target's prefix needs a hash tag, e.g. "{${targetPrefix.replace(/[{}]/g, '')}}"`,
      });
    }
  });
}
export type RollupConfig = Config['rollups'][number];
export type TargetConfig = RollupConfig['target'];

/** Each asset's configured freshness.max_lag in ms, by name. */
export function maxLags(config: Config): Map<string, number> {
  return new Map(config.assets.flatMap((a) => (a.freshness ? [[a.name, a.freshness.max_lag] as const] : [])));
}
