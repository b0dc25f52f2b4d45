import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/db.js';
import { REDIS_URL } from '../helpers/env.js';
import { type DaemonProcess, processHarness } from '../helpers/process.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';
import { coverage, exampleFile, report } from './helpers/producers.js';
import { SystemProcess, venvBin } from './helpers/system.js';

/**
 * examples/spark_foreach_batch.py run for real: pyspark 4 in local mode (Java 17), a file source
 * fed one file (one micro-batch) at a time, a 5-minute watermark delay, a file sink, and the
 * announcements over BullMQ for Python (Redis) to the built daemon, whose hourly rollup
 * (`rerun: on_update`) triggers a webhook. Two files carry late rows: one before the hour is
 * complete (its minute is announced again with a new version, inside generation 1), one after the
 * hour triggered (a reprocessing event: generation 2, reason update). Every announced range is
 * non-empty, the watermark ranges follow each other without a gap or an overlap (across a restart
 * of the job on its checkpoint too), and every row (late ones included) is in the sink.
 */

const procs = processHarness();
const DAY_MS = 86_400_000;
const yesterday = new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS - DAY_MS);
const BEGIN = yesterday.toISOString().slice(0, 10);
const at = (hh: number, mm: number, ss = 0) =>
  `${BEGIN}T${String(hh).padStart(2, '0')}:${String(mm).padStart(2, '0')}:${String(ss).padStart(2, '0')}Z`;
const ASSET = 'spark.orders';

interface Row {
  event_time: string;
  order_id: string;
}
/** Rows every 30 s over [from, to) (hh:mm). */
function rows(from: [number, number], to: [number, number]): Row[] {
  const out: Row[] = [];
  for (let t = from[0] * 3600 + from[1] * 60; t < to[0] * 3600 + to[1] * 60; t += 30) {
    const e = at(Math.floor(t / 3600), Math.floor((t % 3600) / 60), t % 60);
    out.push({ event_time: e, order_id: `o-${t}` });
  }
  return out;
}

interface Announced {
  asset: string;
  start: string;
  end: string;
  version: string;
  id: string;
  extra: { batch_id: number; kind: 'watermark' | 'late_rows' };
}
interface JobState {
  announced_end: number | null;
  progressed: number[];
  events: Announced[];
}

describe('examples/spark_foreach_batch.py on Spark 4 local mode', () => {
  it('announces watermark ranges per micro-batch and late rows as reprocessing, through to hourly triggers', async () => {
    const db = await createTestDatabase();
    const prefix = createTestPrefix();
    const sink = await startWebhookSink();
    const work = mkdtempSync(join(tmpdir(), 'coverage-rollup-spark-'));
    const input = join(work, 'in');
    const staging = join(work, 'staging');
    const checkpoint = join(work, 'chk');
    const output = join(work, 'out');
    mkdirSync(input);
    mkdirSync(staging);
    let daemon: DaemonProcess | undefined;
    let job: SystemProcess | undefined;
    try {
      const raw = {
        database_url: db.url,
        redis_url: REDIS_URL,
        log_level: 'info',
        http: { host: '127.0.0.1', port: 0 },
        queue: { backend: 'redis', prefix, batch_wait: 'PT0.002S' },
        lease: { ttl: 'PT2S', renew_every: 'PT0.5S', retry_every: 'PT0.2S' },
        shutdown_timeout: 'PT10S',
        rollups: [
          {
            id: 'spark_hourly',
            upstream: [ASSET],
            every: 'hour',
            begin: BEGIN,
            rerun: 'on_update',
            target: { type: 'webhook', url: sink.url },
          },
        ],
      };
      const running = await procs.spawn({ name: 'spark-daemon', config: raw });
      daemon = running;
      const began = Date.now();
      const startJob = (name: string, stopAt: string) =>
        new SystemProcess({
          name,
          command: venvBin('spark', 'python'),
          args: [
            exampleFile('spark_foreach_batch.py'),
            ...['--input', input, '--output', output, '--checkpoint', checkpoint],
            ...['--asset', ASSET, '--version', 'v1', '--delay', '5 minutes'],
            ...['--redis-url', REDIS_URL, '--prefix', prefix],
            ...['--stop-at-watermark', stopAt, '--timeout', '420'],
          ],
          env: { SPARK_MASTER: 'local[1]', PYSPARK_PYTHON: venvBin('spark', 'python') },
          cwd: work,
        });
      const stopped = (p: SystemProcess) =>
        waitFor(() => !p.running, { timeout: 120_000, interval: 250, what: `${p.name} to stop` });
      job = startJob('spark-foreach-batch', at(11, 20));
      const state = (): JobState | null => {
        const path = join(checkpoint, 'coverage-rollup.json');
        return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as JobState) : null;
      };
      let written = 0;
      /** One file, one micro-batch: placed by rename (the file source must never see a partial file), then its progress awaited. */
      const feed = async (batch: number, content: Row[]) => {
        const name = `orders-${batch}.json`;
        writeFileSync(join(staging, name), `${content.map((r) => JSON.stringify(r)).join('\n')}\n`);
        renameSync(join(staging, name), join(input, name));
        written += content.length;
        await waitFor(
          () => {
            if (state()?.progressed.includes(batch)) return true;
            if (!job!.running) throw new Error(`the Spark job exited: see ${job!.logPath}`);
            return false;
          },
          { timeout: 240_000, interval: 250, what: `the progress of micro-batch ${batch}` },
        );
      };
      const hourly = () => sink.calls.filter((c) => c.body.rollup === 'spark_hourly');

      await feed(0, rows([10, 0], [10, 20])); // watermark afterwards 10:14:30
      await feed(1, rows([10, 20], [10, 40])); // announces [10:00, 10:14:30)
      // A row of 10:03 arrives late (10:00-10:14:30 is announced): announced again, new version.
      await feed(2, [...rows([10, 40], [11, 10]), { event_time: at(10, 3, 10), order_id: 'late-1' }]);
      await feed(3, rows([11, 10], [11, 20])); // announces [10:34:30, 11:04:30): the hour is complete
      const first = await waitFor(() => hourly()[0], {
        timeout: 60_000,
        interval: 100,
        what: 'generation 1',
      });
      const firstMs = Date.now() - began;
      // A row of 10:50 arrives after the hour triggered: a reprocessing event, generation 2.
      await feed(4, [...rows([11, 20], [11, 30]), { event_time: at(10, 50, 10), order_id: 'late-2' }]);
      const second = await waitFor(() => hourly()[1], {
        timeout: 60_000,
        interval: 100,
        what: 'generation 2',
      });
      const secondMs = Date.now() - began;
      await feed(5, rows([11, 30], [11, 40])); // announces [11:14:30, 11:24:30): the job stops
      await stopped(job);
      // Started again on the same checkpoint: Spark resumes at batch 6 with the watermark it kept,
      // the job at the end it had announced.
      job = startJob('spark-foreach-batch-restarted', at(11, 30));
      await feed(6, rows([11, 40], [11, 50])); // announces [11:24:30, 11:34:30)
      await stopped(job);

      const events = state()!.events;
      const summary = events.map((e) => `${e.extra.kind} ${e.start} ${e.end} ${e.version} ${e.id}`);
      expect(summary).toEqual([
        `watermark ${at(10, 0)} ${at(10, 14, 30)} v1 spark-${ASSET}-b1`,
        `late_rows ${at(10, 3)} ${at(10, 4)} v1+late.b2 spark-${ASSET}-b2-late0`,
        `watermark ${at(10, 14, 30)} ${at(10, 34, 30)} v1 spark-${ASSET}-b2`,
        `watermark ${at(10, 34, 30)} ${at(11, 4, 30)} v1 spark-${ASSET}-b3`,
        `late_rows ${at(10, 50)} ${at(10, 51)} v1+late.b4 spark-${ASSET}-b4-late0`,
        `watermark ${at(11, 4, 30)} ${at(11, 14, 30)} v1 spark-${ASSET}-b4`,
        `watermark ${at(11, 14, 30)} ${at(11, 24, 30)} v1 spark-${ASSET}-b5`,
        `watermark ${at(11, 24, 30)} ${at(11, 34, 30)} v1 spark-${ASSET}-b6`,
      ]);
      for (const e of events) expect(Date.parse(e.end)).toBeGreaterThan(Date.parse(e.start));
      const marks = events.filter((e) => e.extra.kind === 'watermark');
      for (let i = 1; i < marks.length; i++) expect(marks[i]!.start).toBe(marks[i - 1]!.end);

      // The sink holds every row, the late ones included (a stateless query drops none).
      const sunk = readdirSync(output)
        .filter((f) => f.endsWith('.json'))
        .flatMap((f) => readFileSync(join(output, f), 'utf8').split('\n').filter(Boolean));
      expect(sunk).toHaveLength(written);
      expect(sunk.filter((l) => l.includes('"late-'))).toHaveLength(2);

      // The daemon: the hour covered, triggered once (covered), then rerun once (update).
      expect(first.body).toMatchObject({ generation: 1, reason: 'covered' });
      expect((first.body.period as { key: string }).key).toBe(`${BEGIN}T10`);
      expect(
        (first.body.upstreams as Record<string, { versions: string[] }>)[ASSET]!.versions.sort(),
      ).toEqual(['v1', 'v1+late.b2']);
      expect(second.body).toMatchObject({ generation: 2, reason: 'update' });
      expect((second.body.period as { key: string }).key).toBe(`${BEGIN}T10`);
      const hour = await coverage(running.url!, ASSET, at(10, 0), at(11, 0));
      expect(hour).toMatchObject({ covered: true, ratio: 1 });
      const partial = await coverage(running.url!, ASSET, at(11, 0), at(12, 0));
      expect(partial.covered).toBe(false);
      expect(partial.missing).toEqual([{ start: at(11, 34, 30), end: at(12, 0) }]);
      expect(hourly()).toHaveLength(2);
      expect((await running.stop()).code).toBe(0);
      report(
        `spark_foreach_batch.py (pyspark 4.1.1, local[1]): 7 micro-batches (${written} rows, 2 late; a restart before the last) made ` +
          `${marks.length} watermark announcements and ${events.length - marks.length} reprocessing events; ` +
          `${BEGIN}T10 triggered (generation 1, covered) ${firstMs} ms after the job started and reran ` +
          `(generation 2, update) at ${secondMs} ms; ${at(11, 0)}..${at(11, 34, 30)} covered so far`,
      );
    } finally {
      await job?.stop();
      await daemon?.stop();
      await sink.close();
      rmSync(work, { recursive: true, force: true });
    }
  });
});
