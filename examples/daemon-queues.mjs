// The queues of the coverage-rollup daemon an example worker runs beside, on either queue backend
// (docs/events.md "Beside a daemon"), for examples/repair_worker.mjs and downstream_worker.mjs.
//
// The settings come from the environment (QUEUE_BACKEND, REDIS_URL, DATABASE_URL, PREFIX; an empty
// one counts as unset, as the daemon reads it), else from the record the daemon keeps in its data
// directory, daemon.json (in the directory it was started in, or COVERAGE_ROLLUP_DATA_DIR;
// docs/operations.md "The daemon's record"): its queue backend and prefix, and for the embedded
// default its database. With no URL from either, the worker says so and exits 2: it never falls
// back on a library's local default (Redis on 127.0.0.1:6379, libpq's local database), where it
// would wait on queues no daemon writes.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createPostgresBackend, Queue, Worker, withBackend } from 'bullmq';

/** The running daemon's record, or {}: none, or its daemon is gone. */
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

/** FNV-1a, 32 bits, over the UTF-8 bytes (the daemon's rule for naming schemas). */
function fnv1a32(text) {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) hash = Math.imul(hash ^ byte, 0x01000193);
  return hash >>> 0;
}

/** The PostgreSQL schema a prefix names (docs/operations.md "Which queue backend"). */
function queueSchema(prefix) {
  if (/^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(prefix)) return prefix;
  const spelled = prefix.replace(/[^A-Za-z0-9_]/g, '_').replace(/^(?=[0-9])/, '_');
  return `${spelled.slice(0, 54)}_${fnv1a32(prefix).toString(16).padStart(8, '0')}`;
}

/**
 * `queue(name)` and `worker(name, processor, options)` on the daemon's queue backend, `where` (its
 * Redis prefix or PostgreSQL schema, for the log) and `close()` for what they share.
 */
export async function daemonQueues(program) {
  const env = Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== ''));
  const record = daemonRecord();
  const recorded = record.queue ?? {};
  const backend = env.QUEUE_BACKEND || (env.REDIS_URL ? 'redis' : (recorded.backend ?? 'postgres'));
  const prefix = env.PREFIX ?? recorded.prefix ?? 'bull';
  const [url, name] =
    backend === 'redis'
      ? [env.REDIS_URL ?? record.redis_url, 'REDIS_URL']
      : [env.DATABASE_URL ?? record.database_url, 'DATABASE_URL'];
  if (!url) {
    console.error(
      `${program}: no ${name} and no daemon recorded here: run it in the directory the daemon was started in (or set COVERAGE_ROLLUP_DATA_DIR to its data directory), or give the daemon's queue as REDIS_URL (on Redis) or DATABASE_URL (on its PostgreSQL)`,
    );
    process.exit(2);
  }
  if (backend === 'postgres') {
    // BullMQ's PostgreSQL backend takes no prefix: the schema is its namespace.
    const pg = withBackend(createPostgresBackend);
    const connection = () => ({ connectionString: url, schema: queueSchema(prefix), migrate: true });
    return {
      where: `${backend} schema ${queueSchema(prefix)}`,
      queue: (queue) => new pg.Queue(queue, { connection: connection() }),
      worker: (queue, processor, options) =>
        new pg.Worker(queue, processor, { ...options, connection: connection() }),
      close: async () => {},
    };
  }
  const { Redis } = await import('ioredis');
  const connection = new Redis(url, { maxRetriesPerRequest: null });
  return {
    where: `${backend} prefix ${prefix}`,
    queue: (queue) => new Queue(queue, { connection, prefix }),
    worker: (queue, processor, options) => new Worker(queue, processor, { ...options, connection, prefix }),
    close: async () => connection.disconnect(),
  };
}
