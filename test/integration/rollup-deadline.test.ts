import { describe, expect, it } from 'vitest';
import { startTestDaemon, testConfig, testProducer, testQueue } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { nextEvent } from '../helpers/scheduler-events.js';
import { waitFor } from '../helpers/wait.js';

// Deadlines run on real time, so these rollups have short periods that begin in a moment (after
// the daemon leads, so every missed period is one it saw miss): every period is PT2S long and its
// deadline is 1 s after its end.
const PERIOD_MS = 2000;
const DEADLINE_MS = 1000;
const begin = Math.ceil((Date.now() + 3000) / PERIOD_MS) * PERIOD_MS;

const db = await createTestDatabase();
const prefix = createTestPrefix();
const rollup = (id: string, upstream: string, onDeadline: 'trigger' | 'miss') => ({
  id,
  upstream: [upstream],
  every: `PT${PERIOD_MS / 1000}S`,
  timezone: 'UTC',
  begin: new Date(begin).toISOString(),
  policy: { deadline: `PT${DEADLINE_MS / 1000}S`, on_deadline: onDeadline },
  target: { type: 'queue', queue: 'deadline-runs' },
});
const config = testConfig(db, prefix, {
  rollups: [rollup('dl_trigger', 'd.trigger', 'trigger'), rollup('dl_miss', 'd.miss', 'miss')],
});
const daemon = await startTestDaemon(config);
const scheduler = daemon.scheduler!;
const producer = testProducer(config);
const downstream = testQueue('deadline-runs', prefix, config);

/** ISO as the calendar formats UTC points: no fraction when whole seconds. */
const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');

/** A period starting at least a second from now, so its events arrive well before its deadline. */
const upcomingPeriod = () => {
  const start = Math.max(begin, Math.ceil((Date.now() + 1000) / PERIOD_MS) * PERIOD_MS);
  return { start, end: start + PERIOD_MS, deadline: start + PERIOD_MS + DEADLINE_MS };
};

const half = (asset: string, start: number) => ({
  asset,
  start: iso(start),
  end: iso(start + PERIOD_MS / 2),
  version: 'v1',
});

const ingestedAt = async (asset: string, lo: number) => {
  const [row] = await db.sql<{ ingested_at: Date }[]>`
    select e.ingested_at from events e join assets a on a.id = e.asset_id
    where a.name = ${asset} and e.lo = ${lo * 1000} order by e.seq limit 1`;
  return row!.ingested_at;
};

describe('deadline', () => {
  it('on_deadline trigger: waits until end + deadline, then triggers with the gaps in the payload', async () => {
    const p = upcomingPeriod();
    const decided = nextEvent(
      scheduler,
      'decided',
      (d) => d.rollup === 'dl_trigger' && d.lo === p.start * 1000 && d.trigger !== null,
      { what: 'deadline trigger' },
    );
    await producer.add('e', half('d.trigger', p.start));
    const event = await decided;
    expect(event).toMatchObject({ state: 'triggered', generation: 1, trigger: { reason: 'deadline' } });
    // Announced once committed: the decision is there to read.
    const [row] = await db.sql<{ reason: string; decided_at: Date; idempotency_key: string }[]>`
      select reason, decided_at, idempotency_key from triggers
      where rollup_id = 'dl_trigger' and period_lo = ${p.start * 1000}`;
    expect(row!.reason).toBe('deadline');
    expect(row!.idempotency_key).toBe(event.trigger!.idempotencyKey);
    // The event was there before the deadline; the decision waited for it.
    expect((await ingestedAt('d.trigger', p.start)).getTime()).toBeLessThan(p.deadline);
    expect(row!.decided_at.getTime()).toBeGreaterThanOrEqual(p.deadline);

    const job = await waitFor(() => downstream.getJob(row!.idempotency_key), { what: 'deadline job' });
    expect(job.data).toMatchObject({
      rollup: 'dl_trigger',
      generation: 1,
      reason: 'deadline',
      period: { start: iso(p.start), end: iso(p.end) },
      upstreams: {
        'd.trigger': {
          ratio: 0.5,
          missing: [{ start: iso(p.start + PERIOD_MS / 2), end: iso(p.end) }],
          replay_required: [],
          versions: ['v1'],
        },
      },
    });
    const [period] = await db.sql<{ state: string; generation: number; reason: string }[]>`
      select state, generation, reason from periods where rollup_id = 'dl_trigger' and lo = ${p.start * 1000}`;
    expect(period).toEqual({ state: 'triggered', generation: 1, reason: 'deadline' });
  });

  it('on_deadline miss: marks the period missed at the deadline, counts it, and never triggers it', async () => {
    const p = upcomingPeriod();
    const ofPeriod = (d: { rollup: string; lo: number }) => d.rollup === 'dl_miss' && d.lo === p.start * 1000;
    const decided = nextEvent(scheduler, 'decided', (d) => ofPeriod(d) && d.state === 'missed', {
      what: 'missed period',
    });
    await producer.add('e', half('d.miss', p.start));
    expect(await decided).toMatchObject({ generation: 0, trigger: null });
    const [missed] = await db.sql<{ state: string; updated_at: Date; ratio: number }[]>`
      select state, updated_at, ratio from periods where rollup_id = 'dl_miss' and lo = ${p.start * 1000}`;
    expect(missed!.state).toBe('missed');
    expect(missed!.ratio).toBe(0.5);
    expect((await ingestedAt('d.miss', p.start)).getTime()).toBeLessThan(p.deadline);
    expect(missed!.updated_at.getTime()).toBeGreaterThanOrEqual(p.deadline);

    // Every missed period is counted once: the stored one, and the empty ones after it, which are
    // missed too as time goes on without a row (they are derived).
    const metric = async () => {
      const response = await daemon.http.inject({ url: '/metrics' });
      const match = /^coverage_rollup_periods_missed_total\{rollup="dl_miss"\} (\d+)$/m.exec(response.body);
      return match ? Number(match[1]) : 0;
    };
    const listed = async () => {
      const response = await daemon.http.inject({ url: '/v1/rollups?q=dl_miss' });
      return (response.json().rollups[0].periods as { missed: number }).missed;
    };
    await waitFor(
      async () => {
        const before = await listed();
        const value = await metric();
        const after = await listed();
        return value >= 2 && value === before && value === after;
      },
      { what: 'coverage_rollup_periods_missed_total to match the missed periods' },
    );
    const [stored] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from periods where rollup_id = 'dl_miss'`;
    expect(stored!.n).toBe(1); // only the touched period has a row

    // Data that arrives after the deadline is recorded but does not revive the period: the period
    // is touched again (its only evaluation since it was missed) and stays missed.
    const late = nextEvent(scheduler, 'decided', ofPeriod, { what: 'late data evaluated' });
    await producer.add('e', { ...half('d.miss', p.start + PERIOD_MS / 2) });
    expect(await late).toMatchObject({ state: 'missed', generation: 0, trigger: null });
    const [after] = await db.sql<{ state: string; ratio: number }[]>`
      select state, ratio from periods where rollup_id = 'dl_miss' and lo = ${p.start * 1000}`;
    expect(after).toEqual({ state: 'missed', ratio: 1 });
    const [none] = await db.sql<{ n: number }[]>`
      select count(*)::int as n from triggers where rollup_id = 'dl_miss'`;
    expect(none!.n).toBe(0);
  });
});
