/**
 * The PostgreSQL queue backend's connections ended under the daemon: its queue-events
 * reader's LISTEN session terminated, then every session of the database (what a server restart
 * does to them). Outcomes of jobs their worker removes on completion still reach the daemon, each
 * handle that lost a connection says so in one log line naming what it is, and nothing is printed
 * on stderr as a bare stack (BullMQ prints the error of a handle nobody listens to).
 */
import { afterAll, describe, expect, it, vi } from 'vitest';
import { startDaemon } from '../../../src/daemon/daemon.js';
import { queueConnection } from '../../../src/queue/backend.js';
import { queueSchema } from '../../../src/queue/schema.js';
import { connectOnce } from '../../../src/store/pg/db.js';
import { createLogger } from '../../../src/support/log.js';
import { atFileEnd } from '../../helpers/cleanup.js';
import { testConfig, testProducer } from '../../helpers/daemon.js';
import { createTestDatabase } from '../../helpers/db.js';
import { ADMIN_URL, databaseUrl, uniqueName } from '../../helpers/env.js';
import { createTestPrefix } from '../../helpers/redis.js';
import { waitFor } from '../../helpers/wait.js';

process.env.TEST_QUEUE_BACKEND = 'postgres';

// biome-ignore lint/suspicious/noExplicitAny: log lines and answers are read as untyped JSON
type Json = Record<string, any>;

const DAY_MS = 86_400_000;
const day = new Date(Date.now() - DAY_MS).toISOString().slice(0, 10);
const hourOf = (h: number) => `${day}T${String(h).padStart(2, '0')}`;
const span = (h: number) => ({ start: `${hourOf(h)}:00:00Z`, end: `${hourOf(h + 1)}:00:00Z` });

const db = await createTestDatabase();
const prefix = createTestPrefix();
const QUEUE = 'tidy-runs';
const config = testConfig(db, prefix, {
  scheduler: { run_check_every: 'PT0.1S' },
  rollups: [
    {
      id: 'tidy',
      upstream: ['tidy.in'],
      every: 'hour',
      begin: day,
      run: { retries: 0 },
      target: { type: 'queue', queue: QUEUE },
    },
  ],
});
const lines: Json[] = [];
const log = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) });
const connectionErrors = () => lines.filter((l) => l.backend === 'postgres' && l.component === 'queue');

const admin = connectOnce(ADMIN_URL);
const consoleError = vi.spyOn(console, 'error');
const daemon = await startDaemon(config, log);
const producer = testProducer(config);
const downstream = queueConnection(config);
const worker = downstream.worker(QUEUE, prefix, async () => 'ok', { removeOnComplete: { count: 0 } });
afterAll(async () => {
  await daemon.stop();
  await worker.close();
  await downstream.close();
  await admin.end({ timeout: 5 });
});

const succeeded = (h: number) =>
  waitFor(
    async () => {
      const answer = (await daemon.http.inject({ url: `/v1/rollups/tidy/periods/${hourOf(h)}` })).json();
      return answer.period?.run?.state === 'succeeded' ? answer.period.run : undefined;
    },
    { what: `hour ${h} succeeded`, timeout: 30_000 },
  );
const cover = (h: number) => producer.add('e', { asset: 'tidy.in', ...span(h), version: 'v1' });

/** Terminates this database's sessions that `where` selects; answers how many. */
async function terminate(applicationName: string | null): Promise<number> {
  const [row] = await admin<{ n: number }[]>`
    select count(pg_terminate_backend(pid))::int as n from pg_stat_activity
    where datname = ${db.name} and pid <> pg_backend_pid()
      and (${applicationName}::text is null or application_name = ${applicationName})`;
  return row?.n ?? 0;
}
const sessions = async (applicationName: string) =>
  (
    await admin<{ n: number }[]>`
    select count(*)::int as n from pg_stat_activity where datname = ${db.name} and application_name = ${applicationName}`
  )[0]!.n;

describe('PostgreSQL queue backend connections ended', () => {
  it('a job removed on completion is succeeded, also after its reader lost its LISTEN session', async () => {
    await cover(1);
    expect(await succeeded(1)).toMatchObject({ attempt: 1, state: 'succeeded' });

    // The target's queue-events reader names its LISTEN session `<queue>:qe`.
    await waitFor(async () => (await sessions(`${QUEUE}:qe`)) === 1, { what: 'the reader listening' });
    expect(await terminate(`${QUEUE}:qe`)).toBe(1);
    await waitFor(() => connectionErrors().length > 0, { what: 'the error logged' });
    await cover(2);
    expect(await succeeded(2)).toMatchObject({ attempt: 1, state: 'succeeded' });
    // BullMQ opened a new LISTEN session for it.
    await waitFor(async () => (await sessions(`${QUEUE}:qe`)) === 1, { what: 'the reader listening again' });

    // One line, naming the handle and the cause.
    expect(connectionErrors()).toEqual([
      expect.objectContaining({
        level: 40,
        role: 'events',
        queue: QUEUE,
        schema: queueSchema(prefix),
        code: '57P01',
        error: expect.stringMatching(/terminating connection due to administrator command/),
      }),
    ]);
  });

  it('every session of the database ended (a restart): outcomes still arrive, one line per handle, nothing on stderr', async () => {
    const before = connectionErrors().length;
    await waitFor(async () => (await sessions(`${QUEUE}:qe`)) === 1, { what: 'the reader listening' });
    expect(await terminate(null)).toBeGreaterThan(5);
    // A producer's add on a session ended a moment ago fails (its pool had not noticed yet); as
    // after a restart, the producer tries again, on a new session.
    await waitFor(() => cover(3).then(() => true), { what: 'the event added' });
    expect(await succeeded(3)).toMatchObject({ attempt: 1, state: 'succeeded' });
    await cover(4);
    expect(await succeeded(4)).toMatchObject({ attempt: 1, state: 'succeeded' });

    const after = connectionErrors().slice(before);
    expect(after.length).toBeGreaterThan(0);
    for (const line of after) {
      expect(line).toMatchObject({
        queue: expect.any(String),
        schema: queueSchema(prefix),
        handle: expect.any(Number),
      });
      expect(['producer', 'worker', 'events']).toContain(line.role);
    }
    // Once per handle and outage.
    const handles = after.map((l) => l.handle);
    expect(new Set(handles).size).toBe(handles.length);
    const printed = consoleError.mock.calls.map((args) => String(args[0]));
    expect(printed.filter((p) => /terminating connection|Connection terminated/.test(p))).toEqual([]);
  });

  it('a reader that could not connect at first (a server still starting) reads the outcomes once it can', async () => {
    // Its database does not exist yet: every connect of the reader's pool fails until it does.
    const name = uniqueName('cr_test');
    atFileEnd(async () => {
      const dropper = connectOnce(ADMIN_URL);
      await dropper`drop database if exists ${dropper(name)} with (force)`;
      await dropper.end();
    });
    const later = { ...config, database_url: databaseUrl(name) };
    const queues = queueConnection(later);
    // One reader asked to start a minute back (its cursor's read fails first), one from the end
    // (BullMQ's own start fails first: its pool cannot connect).
    const readers = [
      queues.queueEvents('late', prefix, { lastEventId: `${Date.now() - 60_000}-0` }),
      queues.queueEvents('late', prefix),
    ];
    const failures = readers.map(() => [] as Error[]);
    const completed = readers.map(() => [] as string[]);
    readers.forEach((events, i) => {
      events.on('error', (error) => failures[i]!.push(error));
      events.on('completed', ({ jobId }) => completed[i]!.push(jobId));
    });
    try {
      await waitFor(() => failures.every((f) => f.length > 0), { what: 'failed starts' });
      await admin`create database ${admin(name)}`;
      // Both reading: the one from the end reads what is added after it started, not before.
      await waitFor(
        async () =>
          (
            await admin<{ n: number }[]>`
            select count(*)::int as n from pg_stat_activity
            where datname = ${name} and application_name = 'late:qe' and query like '%LISTEN bullmq_events%'`
          )[0]!.n === 2,
        { what: 'both readers listening', timeout: 30_000 },
      );
      const producer = queues.queue('late', prefix);
      const lateWorker = queues.worker('late', prefix, async () => 'ok', { removeOnComplete: { count: 0 } });
      try {
        await producer.add('job', {}, { jobId: 'late-1' });
        await waitFor(() => completed.every((c) => c.includes('late-1')), {
          what: 'the completion read by both',
          timeout: 30_000,
        });
        expect(await producer.getJobState('late-1')).toBe('unknown'); // removed: the event told
      } finally {
        await lateWorker.close();
        await producer.close();
      }
    } finally {
      for (const events of readers) await events.close();
      await queues.close();
    }
  });
});
