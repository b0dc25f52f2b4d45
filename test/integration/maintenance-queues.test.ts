/**
 * Table maintenance of the queue schemas: on BullMQ's PostgreSQL backend every
 * event is a `job` row inserted, updated and deleted, and where autovacuum does not run the daemon
 * vacuums that table as it does its own. A daemon on Redis never touches a queue schema.
 */
import { describe, expect, it } from 'vitest';
import { type Daemon, startDaemon } from '../../src/daemon/daemon.js';
import { queueConnection } from '../../src/queue/backend.js';
import { queueSchema } from '../../src/queue/schema.js';
import { createLogger } from '../../src/support/log.js';
import { startTestDaemon, testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const JOBS = 500;
const db = await createTestDatabase();
const prefix = createTestPrefix();
const schema = queueSchema(prefix);
const onBackend = (backend: 'postgres' | 'redis') =>
  testConfig(db, prefix, {
    queue: { backend, prefix, batch_wait: 'PT0.002S' },
    retention: { prune_every: 'PT1S' },
  });

const jobTable = async () =>
  (
    await db.sql<{ dead: number; vacuums: number; analyzed: Date | null }[]>`
      select n_dead_tup::int as dead, vacuum_count::int as vacuums, last_analyze as analyzed
      from pg_stat_user_tables where schemaname = ${schema} and relname = 'job'`
  )[0];

/** Whether a daemon's maintenance loop has finished a pass since it started. */
const passed = async (daemon: Daemon) =>
  (await daemon.http.inject({ url: '/readyz' })).json().maintenance.last_pass_at !== null;

describe('queue schemas on the PostgreSQL backend, where autovacuum does not run', () => {
  it('fills and drains a queue: its job table is left with dead rows', async () => {
    const config = onBackend('postgres');
    const connection = queueConnection(config);
    const queue = connection.queue<{ i: number }>(config.queue.name, prefix);
    await queue.getJobCounts('waiting'); // BullMQ creates the schema on first use
    await db.sql`alter table ${db.sql(schema)}.job set (autovacuum_enabled = false)`;
    await db.sql`alter table ${db.sql(schema)}.event set (autovacuum_enabled = false)`;
    await queue.addBulk(Array.from({ length: JOBS }, (_, i) => ({ name: 'e', data: { i } })));
    // Removed on completion, as the ingest worker does on this backend.
    const worker = connection.worker(config.queue.name, prefix, async () => {}, {
      concurrency: 8,
      removeOnComplete: { count: 0 },
    });
    await waitFor(
      async () => {
        const counts = await queue.getJobCounts('waiting', 'active', 'completed');
        return Object.values(counts).every((n) => n === 0);
      },
      { what: 'the queue drained', timeout: 60_000 },
    );
    await worker.close();
    await queue.close();
    await connection.close();
    // Counted once the workers' backends have reported (at the latest when they exit).
    await waitFor(async () => ((await jobTable())?.dead ?? 0) >= JOBS, { what: 'dead job rows counted' });
    expect((await jobTable())?.vacuums).toBe(0);
  });

  it('a daemon on Redis leaves the queue schema alone', async () => {
    const config = onBackend('redis');
    const daemon = await startDaemon(config, createLogger(config.log_level));
    try {
      await waitFor(() => passed(daemon), { what: 'a maintenance pass' });
    } finally {
      await daemon.stop();
    }
    const job = await jobTable();
    expect(job?.vacuums).toBe(0);
    expect(job?.analyzed).toBeNull();
    expect(job?.dead).toBeGreaterThanOrEqual(JOBS);
  });

  it('a daemon on PostgreSQL vacuums the job table of the queue it consumes', async () => {
    const daemon = await startTestDaemon(onBackend('postgres'));
    // VACUUM (ANALYZE) reports the vacuum first and the analyze when that part ends. The dead rows
    // are waited for too: a backend of the first test may report its deletes after the daemon's
    // first vacuum (seen in a full run: 1,500 dead after it), and the daemon's next pass (every
    // second here) vacuums them then.
    await waitFor(
      async () => {
        const job = await jobTable();
        return (job?.vacuums ?? 0) > 0 && job?.analyzed !== null && job?.dead === 0;
      },
      { what: 'the job table vacuumed and analyzed by the daemon, no dead rows left', timeout: 30_000 },
    );
    const job = await jobTable();
    expect(job?.dead).toBe(0);
    const ready = (await daemon.http.inject({ url: '/readyz' })).json();
    expect(ready.maintenance.queue_schemas).toEqual([schema]);
    expect(ready.maintenance.tables_vacuumed).toBeGreaterThan(0);
    // The queue's tables are named too: where autovacuum runs for the database (not on the test
    // servers, where daemon_maintains is true either way) they are why the daemon maintains.
    expect(ready.maintenance.daemon_maintains).toBe(true);
    expect(ready.maintenance.tables_without_autovacuum).toEqual(
      expect.arrayContaining([`${schema}.event`, `${schema}.job`]),
    );
  });
});
