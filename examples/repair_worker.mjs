// A producer's backfill worker for repair requests sent to a `queue` target (docs/repairs.md).
//   REPAIR_QUEUE=backfills node examples/repair_worker.mjs   (from the project folder, after npm ci)
//   env: REPAIR_QUEUE (default repairs), EVENTS_QUEUE (default asset-events), VERSION (default
//        backfill), PARTIAL_ATTEMPTS (see below); beside a daemon it finds its queues by itself,
//        elsewhere QUEUE_BACKEND, REDIS_URL or DATABASE_URL, PREFIX (examples/daemon-queues.mjs)
//
// Each job is one attempt of a request: {type: "repair", asset, ranges: [{start, end, kind,
// required_version}], rollup, period, idempotency_key, attempt, requested_at, ...}. The worker
// rebuilds each range (here a stand-in: replace produceSlice with the real backfill, e.g. a Spark
// batch over that event-time range) and then announces what it made complete on the events queue,
// exactly like the live producer does. The daemon does not read this job's outcome: it follows the
// request by what the index then covers, so an announcement is the only answer that counts. A range
// still missing at the request's `every` is asked for again as a new attempt (a new job id,
// repair-<id>~a<N>), with only what is still missing.
//
// A `replay_required` range names the version to rebuild at (`required_version`): announce the
// rebuilt slices at that version (any newer completion ends the requirement).
import { daemonQueues } from './daemon-queues.mjs';

// A demonstration switch: attempts up to this number rebuild only the first half of each range, so
// a partial repair and the re-sent rest can be watched.
const PARTIAL_ATTEMPTS = Number(process.env.PARTIAL_ATTEMPTS ?? 0);
const REPAIR_QUEUE = process.env.REPAIR_QUEUE || 'repairs';

const queues = await daemonQueues('repair_worker.mjs');
const events = queues.queue(process.env.EVENTS_QUEUE || 'asset-events');

/** Rebuild [start, end) of the asset: replace with the real work. Returns the range it made complete. */
async function produceSlice(asset, range, attempt) {
  const job = { asset, start: range.start, end: range.end };
  if (attempt <= PARTIAL_ATTEMPTS) job.end = half(job.start, job.end);
  // ... recompute job.asset's data for [job.start, job.end) and commit it ...
  return { start: job.start, end: job.end };
}

/** The middle of a range: ISO timestamps (to the millisecond) or integers. */
function half(start, end) {
  if (typeof start === 'number') return start + Math.max(1, Math.floor((end - start) / 2));
  const [a, b] = [Date.parse(start), Date.parse(end)];
  return new Date(a + Math.max(1, Math.floor((b - a) / 2))).toISOString();
}

const worker = queues.worker(
  REPAIR_QUEUE,
  async (job) => {
    const request = job.data;
    if (request?.type !== 'repair' || !Array.isArray(request.ranges))
      return { skipped: 'not a repair request' };
    console.log(
      `${job.id}: ${request.asset}, ${request.ranges.length} range(s), attempt ${request.attempt}` +
        (request.rollup ? ` (${request.rollup} ${request.period?.key} waits on it)` : ' (by hand)'),
    );
    for (const [i, range] of request.ranges.entries()) {
      const made = await produceSlice(request.asset, range, request.attempt);
      // The announcement: an event id per slice and attempt, so a redelivered job changes nothing.
      await events.add('backfill', {
        asset: request.asset,
        start: made.start,
        end: made.end,
        version: range.required_version ?? process.env.VERSION ?? 'backfill',
        id: `${request.idempotency_key}/${i}`,
        extra: { repair: request.idempotency_key },
      });
      console.log(`  ${range.kind} ${range.start} .. ${range.end}: announced ${made.start} .. ${made.end}`);
    }
    return { announced: request.ranges.length };
  },
  { removeOnComplete: { age: 86_400 }, removeOnFail: { age: 7 * 86_400 } },
);
worker.on('failed', (job, error) => console.log(`${job?.id}: failed (${error.message})`));
console.log(`repair worker waiting on ${REPAIR_QUEUE} (${queues.where})`);

async function shutdown() {
  await worker.close();
  await events.close();
  await queues.close();
}
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);
