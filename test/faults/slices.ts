import type { Sql } from '../../src/store/pg/db.js';
import { type EventJob, type Producer, sleep } from './lib.js';

/**
 * The partition suites' stream (test:partition, test:lease-partition): time assets filled slice by
 * slice, in turn, at a steady rate, with some events sent twice; what was sent is the oracle.
 */

export interface SentSlice {
  readonly asset: string;
  readonly id: string;
  /** Microseconds, as the index stores time. */
  readonly lo: number;
  readonly hi: number;
  readonly sentAt: number;
}

export const HOUR_US = 3_600_000_000;
const DAY_MS = 86_400_000;

/** Milliseconds of midnight UTC `days` days ago: every hour a stream starting there fills has ended. */
export function midnightDaysAgo(days: number): number {
  return Math.floor(Date.now() / DAY_MS) * DAY_MS - days * DAY_MS;
}

export class SliceStream {
  /** Every distinct event sent, by asset and id, with its first send's time. */
  readonly sent = new Map<string, SentSlice>();
  /** Events sent a second time under a job id of their own. */
  resent = 0;
  private producing = false;
  private loop: Promise<void> = Promise.resolve();

  constructor(
    readonly assets: readonly string[],
    /** Milliseconds; whole hours, in the past, so every period the stream fills has ended. */
    readonly startMs: number,
    readonly sliceMs = 5 * 60_000,
  ) {}

  /** Event n: asset n mod the number of assets, its next slice. */
  eventAt(n: number): SentSlice & { job: EventJob } {
    const asset = this.assets[n % this.assets.length]!;
    const slice = Math.floor(n / this.assets.length);
    const lo = this.startMs + slice * this.sliceMs;
    const hi = lo + this.sliceMs;
    const id = `${asset}-${slice}`;
    const data = { asset, start: new Date(lo).toISOString(), end: new Date(hi).toISOString(), id };
    return { asset, id, lo: lo * 1000, hi: hi * 1000, sentAt: 0, job: { jobId: id, data } };
  }

  /** Starts sending `rate` events per second in ticks of 100 ms; 3 % are re-sent 50 events later. */
  start(producer: Producer, rate: number): void {
    this.producing = true;
    this.loop = (async () => {
      const perTick = Math.max(1, Math.round(rate / 10));
      const t0 = Date.now();
      for (let tick = 0, n = 0; this.producing; tick++) {
        const jobs: EventJob[] = [];
        const sentAt = Date.now();
        for (let k = 0; k < perTick; k++, n++) {
          const e = this.eventAt(n);
          this.sent.set(`${e.asset}\u0000${e.id}`, { ...e, sentAt });
          jobs.push(e.job);
          if (n % 33 === 32 && n >= 50) {
            const again = this.eventAt(n - 50).job;
            jobs.push({ jobId: `${again.jobId}#again`, data: again.data });
            this.resent++;
          }
        }
        await producer.add(jobs);
        const due = t0 + (tick + 1) * 100;
        if (Date.now() < due) await sleep(due - Date.now()); // pacing, not a wait for a condition
      }
    })();
  }

  async stop(): Promise<void> {
    this.producing = false;
    await this.loop;
  }

  /** Loads what was sent into a table `sent_slices` of the test database. */
  async loadOracle(sql: Sql): Promise<void> {
    await sql`create table sent_slices (asset text not null, lo bigint not null, hi bigint not null)`;
    const slices = [...this.sent.values()];
    for (let i = 0; i < slices.length; i += 1000) {
      const chunk = slices.slice(i, i + 1000);
      await sql`insert into sent_slices select * from unnest(
        ${chunk.map((s) => s.asset)}::text[], ${chunk.map((s) => s.lo)}::int8[], ${chunk.map((s) => s.hi)}::int8[])`;
    }
  }

  /** Assets whose merged index is not range_agg over every slice sent (after loadOracle). */
  mismatchedAssets(sql: Sql) {
    return sql<{ name: string; oracle: string | null; index: string | null }[]>`
      with oracle as (select asset, range_agg(int8range(lo, hi)) as m from sent_slices group by asset),
      idx as (select a.name, range_agg(s.span) as m from segments s join assets a on a.id = s.asset_id group by a.name)
      select coalesce(o.asset, i.name) as name, o.m::text as oracle, i.m::text as index
      from oracle o full join idx i on i.name = o.asset
      where o.m is distinct from i.m`;
  }

  /**
   * Every hour the stream reached, per hourly rollup: whether the oracle covers it for all the
   * rollup's upstreams, and how many decisions the triggers table holds for it (after loadOracle).
   */
  async hourlyPeriods(
    sql: Sql,
    rollups: ReadonlyArray<{ id: string; upstream: readonly string[] }>,
  ): Promise<Array<{ rollup: string; lo: number; covered: boolean; triggers: number }>> {
    const lastHi = Math.max(...[...this.sent.values()].map((e) => e.hi));
    const first = this.startMs * 1000;
    const hours = Array.from(
      { length: Math.ceil((lastHi - first) / HOUR_US) },
      (_, h) => first + h * HOUR_US,
    );
    const periods: Array<{ rollup: string; lo: number; covered: boolean; triggers: number }> = [];
    for (const r of rollups) {
      const rows = await sql<{ lo: number; covered: boolean; triggers: number }[]>`
        select h.lo,
          (select count(*) from unnest(${r.upstream as string[]}::text[]) u(asset)
             where (select range_agg(int8range(s.lo, s.hi)) from sent_slices s where s.asset = u.asset)
               @> int8range(h.lo, h.lo + ${HOUR_US})) = ${r.upstream.length} as covered,
          (select count(*)::int from triggers t where t.rollup_id = ${r.id} and t.period_lo = h.lo) as triggers
        from unnest(${hours}::int8[]) h(lo)`;
      for (const row of rows) periods.push({ rollup: r.id, ...row });
    }
    return periods;
  }
}
