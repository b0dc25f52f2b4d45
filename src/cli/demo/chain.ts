/**
 * The chain demo (`coverage-rollup demo --chain`): config/chain.yaml's raw -> hourly -> daily ->
 * monthly on the demo's own database, November 2026 of 5-minute raw slices, downstream workers
 * that finish every job at once, then one raw hour reprocessed: the hour, its day and its month
 * rerun once each, in order, each after the level below succeeded. Printed as it happens; with
 * --serve the status page (and its /graph) stays up.
 */
import type { Config } from '../../config/index.js';
import type { TriggerPayload } from '../../core/runs/trigger.js';
import type { Daemon } from '../../daemon/daemon.js';
import { queueConnection } from '../../queue/backend.js';
import { decidedAtGeneration, succeededRuns } from '../../store/runs/progress.js';

const NOVEMBER = Date.parse('2026-11-01T00:00:00Z');
const DAYS = 30;
const SLICE = 5 * 60_000;
const HOUR = 3_600_000;
export const REPROCESSED = NOVEMBER + 9 * 24 * HOUR + 5 * HOUR; // 2026-11-10T05:00Z
const iso = (t: number) => new Date(t).toISOString();

/** The chain example made quick to watch: no settle, short retries, outcomes asked for often. */
export function chainDemoConfig(chain: Config, base: Config): Config {
  return {
    ...base,
    assets: chain.assets,
    scheduler: { ...base.scheduler, run_check_every: 200 },
    rollups: chain.rollups.map((r) => ({
      ...r,
      policy: { ...r.policy, settle: 0 },
      run: { ...r.run, backoff: 1000 },
    })),
  };
}

export async function runChainDemo(
  daemon: Daemon,
  config: Config,
  print: (line: string) => void,
  statusUrl: string | undefined,
): Promise<void> {
  const connection = queueConnection(config);
  const producer = connection.queue(config.queue.name, config.queue.prefix);
  const started = Date.now();
  const at = () => `${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s`;
  const done = new Map<string, number>();
  const queues = config.rollups.map((r) => (r.target.type === 'queue' ? r.target.queue : ''));
  const workers = queues.map((queue) =>
    connection.worker<TriggerPayload>(
      queue,
      config.queue.prefix,
      async (job) => {
        const p = job.data;
        done.set(p.rollup, (done.get(p.rollup) ?? 0) + 1);
        if (p.generation > 1)
          print(
            `${at()}  run      ${p.rollup.padEnd(15)} ${p.period.key.padEnd(14)} generation ${p.generation} (${p.reason})`,
          );
      },
      { concurrency: 100 },
    ),
  );
  const until = async (what: string, check: () => Promise<boolean> | boolean, timeoutMs = 600_000) => {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`demo: timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const succeeded = (rollupId: string, generation: number) => succeededRuns(daemon.sql, rollupId, generation);
  const [hourly, daily, monthly] = config.rollups.map((r) => r.id) as [string, string, string];
  try {
    print(
      `chain demo: ${config.rollups.map((r) => `${r.upstream.join(',')} -> ${r.id} -> ${r.output}`).join(', ')}`,
    );
    if (statusUrl) print(`  status page: ${statusUrl}  graph: ${statusUrl}graph`);
    print(`${at()}  streaming November 2026 of events.raw in 5-minute slices (${DAYS * 288} events)`);
    const slices = Array.from({ length: DAYS * 288 }, (_, i) => ({
      name: 'event',
      data: {
        asset: 'events.raw',
        start: iso(NOVEMBER + i * SLICE),
        end: iso(NOVEMBER + (i + 1) * SLICE),
        version: 'v1',
        id: `raw-${i}`,
      },
    }));
    for (let i = 0; i < slices.length; i += 1000) await producer.addBulk(slices.slice(i, i + 1000));
    let last = '';
    await until('the month to be built', async () => {
      const line = `${await succeeded(hourly, 1)}/720 hours, ${await succeeded(daily, 1)}/30 days, ${await succeeded(monthly, 1)}/1 month succeeded`;
      if (line !== last) print(`${at()}  built    ${line}`);
      last = line;
      return line.endsWith('1/1 month succeeded');
    });
    print(
      `${at()}  reprocessing events.raw ${iso(REPROCESSED)} (a replay requirement at v2, then the rebuilt slices):`,
    );
    await producer.add('event', {
      type: 'replay_requirement',
      asset: 'events.raw',
      start: iso(REPROCESSED),
      end: iso(REPROCESSED + HOUR),
      version: 'v2',
    });
    await producer.addBulk(
      Array.from({ length: 12 }, (_, i) => ({
        name: 'event',
        data: {
          asset: 'events.raw',
          start: iso(REPROCESSED + i * SLICE),
          end: iso(REPROCESSED + (i + 1) * SLICE),
          version: 'v2',
          id: `raw-v2-${i}`,
        },
      })),
    );
    await until('the monthly rerun', async () => (await succeeded(monthly, 2)) === 1);
    const reruns = await decidedAtGeneration(daemon.sql, 2);
    print(
      `${at()}  done: ${reruns.length} reruns, one per level, in order: ${reruns.map((r) => `${r.rollup_id} ${r.key}`).join(' -> ')}`,
    );
  } finally {
    for (const w of workers) await w.close();
    await producer.close();
    await connection.close();
  }
}
