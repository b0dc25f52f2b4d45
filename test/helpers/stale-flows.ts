import { once } from 'node:events';
import { afterAll, expect } from 'vitest';
import type { Daemon } from '../../src/daemon/daemon.js';
import { BlackholeProxy } from './blackhole-proxy.js';
import { startTestDaemon, testConfig, testProducer } from './daemon.js';
import { createTestDatabase } from './db.js';
import { createTestPrefix } from './redis.js';
import { waitFor } from './wait.js';

/**
 * Stale PostgreSQL flows, shared by the short variant in `npm test` and the long fault
 * test: daemon A reaches PostgreSQL through a proxy whose existing flows stop answering (bytes
 * neither delivered nor refused) while new connections are forwarded, as when a NAT loses its
 * flows. Optionally a daemon B, started second (A holds the lease), reaches PostgreSQL directly.
 * One-minute slices of one asset stream in at `rate` per second under an hourly rollup; a read
 * is asked of A right at the cut, while its pooled connections are stranded. The flows stay
 * stale until every event sent is indexed and every hour they complete is triggered, then heal.
 */
export interface StaleFlowOptions {
  /** How long events are streamed after the cut. */
  readonly windowMs: number;
  readonly rate: number;
  readonly stallMs: number;
  readonly standby: boolean;
  /** How long after the stream the wait for its last events and decisions (still in the cut) may take. */
  readonly settleMs: number;
}

export interface StaleFlowResult {
  readonly sent: number;
  /** Per event sent after the cut: milliseconds from its send to the test seeing it indexed. */
  readonly latenciesMs: number[];
  /** Per hour completed after the cut: milliseconds from its last slice's send to its trigger. */
  readonly decisionLagsMs: number[];
  /** Hours whose every slice was sent, the warm-up's included. */
  readonly hoursComplete: number;
  readonly hoursCompletedInCut: number;
  /** Hours triggered while the flows were stale (every one completed in the cut, or it fails). */
  readonly hoursTriggeredInCut: number;
  readonly stranded: number;
  readonly read: { status: number; ms: number; ratio: unknown };
  /** After the heal and a pass of the lease holder's scheduler. */
  readonly after: { events: number; distinct: number; triggers: number; hours: number; repeated: number };
}

const MINUTE = 60_000;
const H0 = Date.UTC(2026, 5, 1);
const TICK_MS = 100;
const iso = (ms: number) => new Date(ms).toISOString();

export async function staleFlowScenario(o: StaleFlowOptions) {
  const db = await createTestDatabase();
  const prefix = createTestPrefix();
  const target = new URL(db.url);
  const proxy = await BlackholeProxy.start({ host: target.hostname, port: Number(target.port || 5432) });
  afterAll(async () => {
    proxy.heal();
    await proxy.close();
  });
  const shared = {
    queue: { prefix, batch_wait: 'PT0.002S', pg_stall_timeout: `PT${o.stallMs / 1000}S` },
    rollups: [
      {
        id: 'stale',
        upstream: ['stale.a'],
        every: 'hour',
        begin: '2026-06-01',
        target: { type: 'queue', queue: 'stale-runs' },
      },
    ],
  };
  const a = await startTestDaemon(
    testConfig(db, prefix, { ...shared, database_url: proxy.proxiedUrl(db.url) }),
  );
  // After hooks run last-registered first: a run that failed in the cut heals the flows before
  // the daemon stops, or its stop waits on them and the database is left behind.
  afterAll(() => proxy.heal());
  await waitFor(async () => (await db.sql`select 1 from scheduler_leases`).length === 1, {
    what: 'A holding the lease',
  });
  const daemons = [a];
  if (o.standby) daemons.push(await startTestDaemon(testConfig(db, prefix, shared)));
  const producer = testProducer(testConfig(db, prefix, shared));
  const event = (i: number) => ({
    name: 'event',
    data: { asset: 'stale.a', start: iso(H0 + i * MINUTE), end: iso(H0 + (i + 1) * MINUTE), id: `e${i}` },
  });
  const hourOf = (i: number) => Math.floor(i / 60);

  async function run(): Promise<StaleFlowResult> {
    // Warm: every pool of A has connections open (ingest, scheduler, LISTEN, lease, HTTP reads).
    await producer.addBulk(Array.from({ length: 30 }, (_, i) => event(i)));
    // All 30, not the last one: with a standby both instances ingest, so e29 can commit before
    // e0–e28 (a read at the cut then truthfully answered 0.5).
    await waitFor(async () => (await db.sql`select 1 from events`).length === 30, {
      what: 'the warm-up indexed',
    });
    expect((await warmCoverage(a)).json().ratio).toBe(1);

    const stranded = proxy.staleExisting();
    const cutAt = Date.now();
    const reading = (async () => {
      const res = await warmCoverage(a);
      return { status: res.statusCode, ms: Date.now() - cutAt, ratio: res.json().ratio };
    })();
    const sentAt = new Map<string, number>();
    const seenAt = new Map<string, number>();
    const completedAt = new Map<number, number>();
    const triggeredAt = new Map<number, number>();
    let next = 30;
    let streaming = true;
    const watching = (async () => {
      for (;;) {
        const unseen = [...sentAt.keys()].filter((id) => !seenAt.has(id));
        const [events, triggers] = await Promise.all([
          db.sql<{ id: string }[]>`select event_id_text(event_id, event_id_hex) as id from events
            where event_id_text(event_id, event_id_hex) = any(${unseen}::text[])`,
          db.sql<{ lo: number }[]>`select period_lo as lo from triggers where rollup_id = 'stale'`,
        ]);
        const now = Date.now();
        for (const { id } of events) seenAt.set(id, now);
        for (const { lo } of triggers) if (!triggeredAt.has(lo)) triggeredAt.set(lo, now);
        const done = [...completedAt.keys()].every((h) => triggeredAt.has((H0 + h * 60 * MINUTE) * 1000));
        if (!streaming && seenAt.size === sentAt.size && done) return;
        if (now - cutAt > o.windowMs + o.settleMs)
          throw new Error(
            `in the cut: ${sentAt.size - seenAt.size} events not indexed, hours ${[...completedAt.keys()]} completed, ${triggeredAt.size} triggered`,
          );
        await new Promise((r) => setTimeout(r, 50)); // the poll interval of the wait above
      }
    })();
    // The stream, paced at its rate: what is due each tick (a pace, not a wait for a condition).
    for (let tick = 1; Date.now() - cutAt < o.windowMs; tick++) {
      const due = 30 + Math.floor((o.rate * tick * TICK_MS) / 1000);
      const batch = Array.from({ length: due - next }, (_, k) => event(next + k));
      const at = Date.now();
      if (batch.length > 0) await producer.addBulk(batch);
      for (const { data } of batch) sentAt.set(data.id, at);
      for (let i = next; i < due; i++) if (i % 60 === 59) completedAt.set(hourOf(i), at);
      next = due;
      await new Promise((r) => setTimeout(r, Math.max(0, cutAt + tick * TICK_MS - Date.now())));
    }
    streaming = false;
    await watching;
    const read = await reading;
    proxy.heal();

    // After the heal (anything held in the stale flows arrives now) and a pass of the leader.
    await Promise.race(daemons.map((d) => once(d.scheduler!, 'pass')));
    const [after] = await db.sql<StaleFlowResult['after'][]>`
      select (select count(*)::int from events) as events,
        (select count(distinct event_id_text(event_id, event_id_hex))::int from events) as distinct,
        (select count(*)::int from triggers where rollup_id = 'stale') as triggers,
        (select count(distinct period_lo)::int from triggers where rollup_id = 'stale') as hours,
        (select count(*)::int from triggers where rollup_id = 'stale' and generation > 1) as repeated`;
    return {
      sent: next,
      latenciesMs: [...sentAt].map(([id, at]) => seenAt.get(id)! - at),
      decisionLagsMs: [...completedAt].map(([h, at]) => triggeredAt.get((H0 + h * 60 * MINUTE) * 1000)! - at),
      hoursComplete: Math.floor(next / 60),
      hoursCompletedInCut: completedAt.size,
      hoursTriggeredInCut: [...completedAt.keys()].filter((h) =>
        triggeredAt.has((H0 + h * 60 * MINUTE) * 1000),
      ).length,
      stranded,
      read,
      after: after!,
    };
  }
  return { run };
}

/** The coverage of the warm-up's half hour: 1 once it is indexed. */
function warmCoverage(daemon: Daemon) {
  return daemon.http.inject({
    url: `/v1/assets/stale.a/coverage?start=${iso(H0)}&end=${iso(H0 + 30 * MINUTE)}`,
  });
}
