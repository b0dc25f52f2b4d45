#!/usr/bin/env node
/**
 * Publish asset events to coverage-rollup from Node.js with BullMQ (6.x), on either queue backend.
 *
 *   npm install bullmq ioredis          # Redis
 *   npm install bullmq pg               # BullMQ's PostgreSQL backend (the embedded default)
 *   node examples/node_producer.mjs --asset warehouse.orders --start 2025-06-01T10:00:00Z
 *
 * The same options as examples/python_producer.py (docs/events.md "Producers"). Run beside a
 * daemon (in the directory it was started in, or with COVERAGE_ROLLUP_DATA_DIR set to its data
 * directory) it finds it through the record the daemon keeps there, daemon.json
 * (docs/operations.md "The daemon's record"): its queue backend, name, prefix, groups and, for the
 * embedded default, its database. The environment (QUEUE_BACKEND, REDIS_URL, DATABASE_URL,
 * QUEUE_NAME, QUEUE_PREFIX, QUEUE_GROUPS; an empty one counts as unset, as the daemon reads it) and
 * the options win over it; with no URL from any of them it says so and exits 2, never falling back
 * on node-postgres's local defaults. Prints one JSON line: how many events went where.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createPostgresBackend, Queue, withBackend } from 'bullmq';

/** The running daemon's record (docs/operations.md), or {}: none, or its daemon is gone. */
function daemonRecord() {
  const path = join(process.env.COVERAGE_ROLLUP_DATA_DIR || '.coverage-rollup', 'daemon.json');
  try {
    const record = JSON.parse(readFileSync(path, 'utf8'));
    process.kill(record.pid, 0);
    return record;
  } catch (error) {
    return error.code === 'EPERM' ? JSON.parse(readFileSync(path, 'utf8')) : {};
  }
}

// An empty variable counts as unset, as the daemon reads it (a compose file's `X=${X}` leaves one).
const env = Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== ''));
const record = daemonRecord();
const recorded = record.queue ?? {};
const { values } = parseArgs({
  options: {
    backend: {
      type: 'string',
      default: env.QUEUE_BACKEND || (env.REDIS_URL ? 'redis' : (recorded.backend ?? 'postgres')),
    },
    'redis-url': { type: 'string', default: env.REDIS_URL ?? record.redis_url ?? '' },
    'database-url': { type: 'string', default: env.DATABASE_URL ?? record.database_url ?? '' },
    queue: { type: 'string', default: env.QUEUE_NAME ?? recorded.name ?? 'asset-events' },
    prefix: { type: 'string', default: env.QUEUE_PREFIX ?? recorded.prefix ?? 'bull' },
    groups: { type: 'string', default: env.QUEUE_GROUPS ?? String(recorded.groups ?? 1) },
    asset: { type: 'string', multiple: true },
    start: { type: 'string' },
    slices: { type: 'string', default: '12' },
    minutes: { type: 'string', default: '5' },
    version: { type: 'string', default: 'v1' },
  },
});
if (!values.asset?.length || !values.start) {
  console.error(
    'usage: node_producer.mjs --asset NAME [--asset NAME...] --start ISO [--slices 12 --minutes 5]',
  );
  process.exit(2);
}
// node-postgres reads an empty connection string as its defaults (the local server, the OS user)
// and ioredis as 127.0.0.1:6379: with no URL from anywhere, say so instead.
const [url, name] =
  values.backend === 'redis' ? [values['redis-url'], 'REDIS_URL'] : [values['database-url'], 'DATABASE_URL'];
if (!url) {
  console.error(
    `node_producer.mjs: no ${name} and no daemon recorded here: run it in the directory the daemon was started in (or set COVERAGE_ROLLUP_DATA_DIR to its data directory), or give the daemon's ${values.backend === 'redis' ? 'Redis' : 'database'} as ${name} or --${name.toLowerCase().replace('_', '-')}`,
  );
  process.exit(2);
}
const groups = Number(values.groups);

/** FNV-1a, 32 bits, over the UTF-8 bytes of the asset name (the daemon's routing rule). */
function fnv1a32(text) {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) hash = Math.imul(hash ^ byte, 0x01000193);
  return hash >>> 0;
}

/** The prefix of the queue group that carries `asset` (docs/scaling.md "Queue groups and Redis Cluster"). */
const groupPrefix = (asset) =>
  groups === 1 ? values.prefix : `{${values.prefix}-${fnv1a32(asset.trim()) % groups}}`;

/** The PostgreSQL schema a prefix names (docs/operations.md "Which queue backend"). */
function queueSchema(prefix) {
  if (/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(prefix)) return prefix;
  const spelled = prefix.replace(/[^A-Za-z0-9_]/g, '_').replace(/^(?=[0-9])/, '_');
  return `${spelled.slice(0, 54)}_${fnv1a32(prefix).toString(16).padStart(8, '0')}`;
}

const pg = withBackend(createPostgresBackend);
const where = (prefix) => (values.backend === 'postgres' ? queueSchema(prefix) : prefix);
const redis = values.backend === 'redis' ? new (await import('ioredis')).Redis(values['redis-url']) : null;
function openQueue(prefix) {
  if (values.backend === 'postgres') {
    // BullMQ's PostgreSQL backend takes no prefix: the schema is its namespace.
    return new pg.Queue(values.queue, {
      // migrate: a producer that starts before the daemon creates the schema (BullMQ's Node client
      // refuses an uninitialised one otherwise; BullMQ for Python migrates by itself).
      connection: { connectionString: values['database-url'], schema: queueSchema(prefix), migrate: true },
    });
  }
  return new Queue(values.queue, { connection: redis, prefix });
}

const iso = (ms) => new Date(ms).toISOString().replace('.000Z', 'Z');
const queues = new Map();
const sent = {};
try {
  const step = Number(values.minutes) * 60_000;
  for (const asset of values.asset) {
    const prefix = groupPrefix(asset);
    if (!queues.has(prefix)) queues.set(prefix, openQueue(prefix));
    for (let i = 0; i < Number(values.slices); i++) {
      const start = Date.parse(values.start) + i * step;
      await queues.get(prefix).add('event', {
        asset,
        start: iso(start),
        end: iso(start + step),
        version: values.version,
        // A stable id per slice makes a redelivery harmless: the daemon ingests each id once.
        id: `${asset}@${iso(start).replace(/[-:]/g, '')}#${values.version}`,
        produced_at: iso(Date.now()),
        extra: { producer: 'examples/node_producer.mjs' },
      });
      sent[where(prefix)] = (sent[where(prefix)] ?? 0) + 1;
    }
  }
} finally {
  await Promise.all([...queues.values()].map((q) => q.close()));
  redis?.disconnect();
}
console.log(JSON.stringify({ backend: values.backend, queue: values.queue, sent }));
