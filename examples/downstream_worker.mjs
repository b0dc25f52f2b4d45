// A downstream worker consuming coverage-rollup triggers from a queue target.
//   node examples/downstream_worker.mjs      (from the project folder, after npm ci)
// Each job's id is the trigger's idempotency key (rollup@periodstart#generation), so a redelivered
// trigger is the same job; generation > 1 means a rerun of a period already processed.
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';

const connection = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
  maxRetriesPerRequest: null,
});

const worker = new Worker(
  'downstream-runs',
  async (job) => {
    const { rollup, period, generation, reason, upstreams } = job.data;
    console.log(
      `${job.id}: run ${rollup} for ${period.key} [${period.start}, ${period.end}) generation ${generation} (${reason})`,
    );
    for (const [asset, u] of Object.entries(upstreams)) {
      console.log(
        `  ${asset}: ratio ${u.ratio}, versions ${u.versions.join(',')}, missing ${JSON.stringify(u.missing)}`,
      );
    }
    // ... run the job for the period, overwriting the output of earlier generations ...
  },
  { connection },
);

process.on('SIGINT', async () => {
  await worker.close();
  connection.disconnect();
});
