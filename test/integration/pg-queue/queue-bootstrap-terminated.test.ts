/**
 * A PostgreSQL queue handle whose session is ended while it prepares its schema (BullMQ's migration
 * on a client it checked out of its pool): an administrator's terminate, a server restart or a
 * failover while the daemon starts. The handle reports the error and prepares again on its next
 * use; nothing is thrown outside it (a client with no 'error' listener crashed the process).
 */
import { MIGRATION_ADVISORY_LOCK_KEY } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { queueConnection } from '../../../src/queue/backend.js';
import { queueSchema } from '../../../src/queue/schema.js';
import { testConfig } from '../../helpers/daemon.js';
import { createTestDatabase } from '../../helpers/db.js';
import { createTestPrefix } from '../../helpers/redis.js';
import { waitFor } from '../../helpers/wait.js';

const db = await createTestDatabase();
const prefix = createTestPrefix();
const config = testConfig(db, prefix, { queue: { backend: 'postgres', prefix } });
const schema = queueSchema(prefix);

// What escaped every handler: vitest reports these too, this names them in the test's failure.
const escaped: unknown[] = [];
const onEscape = (error: unknown) => void escaped.push(error);
process.on('uncaughtException', onEscape);
afterAll(() => void process.off('uncaughtException', onEscape));

/** The sessions of this database waiting on an advisory lock: a handle's migration, held below. */
const migrating = async () =>
  db.sql<{ pid: number }[]>`
    select pid from pg_stat_activity
    where datname = ${db.name} and wait_event_type = 'Lock' and wait_event = 'advisory'`;

describe('a queue handle whose session ends while it prepares its schema', () => {
  it('reports the error and prepares again on its next use', async () => {
    const connection = queueConnection(config);
    const errors: Error[] = [];
    let queue: ReturnType<typeof connection.queue> | undefined;
    try {
      // BullMQ's migration takes this lock first: held here, the handle's checked-out client waits
      // in it, and its session is ended there.
      await db.sql.begin(async (tx) => {
        await tx`select pg_advisory_xact_lock(${MIGRATION_ADVISORY_LOCK_KEY}, hashtext(${schema}))`;
        queue = connection.queue('boot', prefix);
        queue.on('error', (error) => errors.push(error));
        const [waiting] = await waitFor(
          async () => {
            const rows = await migrating();
            return rows.length > 0 ? rows : undefined;
          },
          { what: 'the handle migrating' },
        );
        await db.sql`select pg_terminate_backend(${waiting!.pid})`;
        await waitFor(() => errors.length + escaped.length > 0, { what: 'the lost session reported' });
      });
      expect(escaped).toEqual([]);
      // The session's end, as the client saw it ('Connection terminated unexpectedly' after the
      // server's 57P01), on the handle's own 'error' event.
      expect(errors.map((e) => e.message)).toContainEqual(expect.stringMatching(/terminat/i));
      // The lock is released with the transaction: the next use prepares the schema and answers.
      expect(await queue!.getJobCounts('waiting')).toEqual({ waiting: 0 });
    } finally {
      await queue?.close();
      await connection.close();
    }
  });
});
