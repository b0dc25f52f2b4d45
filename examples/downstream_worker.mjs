// A downstream worker for a `queue` target: its BullMQ job's outcome IS the run's outcome.
//   node examples/downstream_worker.mjs      (from the project folder, after npm ci)
//   env: QUEUE (default downstream-runs), FAIL_ATTEMPTS (see below); beside a daemon it finds its
//        queues by itself, elsewhere QUEUE_BACKEND, REDIS_URL or DATABASE_URL, PREFIX
//        (examples/daemon-queues.mjs)
//
// The daemon follows each job it added (docs/targets/queue.md): when the processor returns, the run is
// `succeeded`; when it throws, BullMQ retries the job as its own `attempts` option says, and the run
// is `failed` (with the error message) only once the job fails for good. Nothing else to report: no
// callback, no status table. The daemon's own retry policy (`run: {retries, backoff}`) then adds a
// new attempt, a new job with a distinct id (`...#1~a2`), which this worker runs like any other.
//
// Each job's id is the run's idempotency key (rollup@periodstart#generation, plus ~aN for attempt
// N > 1), so a redelivered trigger is the same job; generation > 1 means a rerun of a period already
// processed: overwrite the output of earlier generations, do not append to it.
import { UnrecoverableError } from 'bullmq';
import { daemonQueues } from './daemon-queues.mjs';

// A demonstration switch: attempts up to this number fail, so a retry can be watched.
const FAIL_ATTEMPTS = Number(process.env.FAIL_ATTEMPTS ?? 0);

const QUEUE = process.env.QUEUE || 'downstream-runs';
const queues = await daemonQueues('downstream_worker.mjs');

/** The work for one period: replace this with the real aggregation. Throw to fail the run. */
async function runPeriod(payload) {
  const { rollup, period, generation, attempt = 1, upstreams } = payload;
  for (const [asset, u] of Object.entries(upstreams)) {
    if (u.ratio < 1 && u.missing.length > 0)
      console.log(`  ${asset}: ratio ${u.ratio}, first missing ${JSON.stringify(u.missing[0])}`);
  }
  if (attempt <= FAIL_ATTEMPTS) throw new Error(`simulated failure of attempt ${attempt}`);
  // ... read the upstreams for [period.start, period.end), write the output ...
  return { rows: 0, rollup, period: period.key, generation };
}

const worker = queues.worker(
  QUEUE,
  async (job) => {
    const payload = job.data;
    console.log(
      `${job.id}: ${payload.rollup} ${payload.period.key} generation ${payload.generation}` +
        ` attempt ${payload.attempt ?? 1} (${payload.reason}), job try ${job.attemptsMade + 1}`,
    );
    // A payload this worker cannot read will not get better by retrying: fail the job at once.
    if (!payload?.period?.start || !payload.upstreams) throw new UnrecoverableError('not a trigger payload');
    return runPeriod(payload); // the return value is kept with the job; the daemon reads only its state
  },
  {
    // Keep finished jobs for a day: the daemon reads a run's outcome from its job's state, and a
    // run whose job was removed before any outcome of it was seen can only be recorded as `lost`.
    removeOnComplete: { age: 86_400 },
    removeOnFail: { age: 7 * 86_400 },
  },
);
worker.on('failed', (job, error) => console.log(`${job?.id}: failed (${error.message})`));
worker.on('completed', (job) => console.log(`${job.id}: done`));
console.log(`downstream worker waiting on ${QUEUE} (${queues.where})`);

async function shutdown() {
  await worker.close(); // waits for the job in hand, so its outcome is recorded
  await queues.close();
}
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);
