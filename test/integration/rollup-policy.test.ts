import { describe, expect, it } from 'vitest';
import { startTestDaemon, testConfig, testProducer } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const db = await createTestDatabase();
const prefix = createTestPrefix();
const hourly = (id: string, upstream: string[], policy: Record<string, unknown>) => ({
  id,
  upstream,
  every: 'hour',
  timezone: 'UTC',
  begin: '2026-11-02T00:00:00Z',
  policy,
  target: { type: 'queue', queue: 'policy-runs' },
});
const SETTLE_MS = 3000;
const config = testConfig(db, prefix, {
  rollups: [
    hourly('ratio98', ['p.ratio'], { ratio: 0.98 }),
    hourly('gap72', ['p.gap'], { max_missing: 'PT72S' }),
    hourly('settled', ['p.settle'], { settle: `PT${SETTLE_MS / 1000}S` }),
    hourly('joined', ['p.orders', 'p.payments'], {}),
  ],
});
await startTestDaemon(config);
const producer = testProducer(config);

const at = (hhmmss: string) => `2026-11-02T${hhmmss}Z`;
const micros = (iso: string) => Date.parse(iso) * 1000;
let ids = 0;
const send = (asset: string, start: string, end: string, version = 'v1') =>
  producer.add('e', { asset, start: at(start), end: at(end), version, id: `ev-${++ids}` });

interface PeriodRow {
  state: string;
  ratio: number;
  ratios: Record<string, number>;
  satisfied_since: Date | null;
  generation: number;
}
const period = async (rollup: string, start: string) => {
  const [row] = await db.sql<PeriodRow[]>`
    select state, ratio, ratios, satisfied_since, generation from periods
    where rollup_id = ${rollup} and lo = ${micros(at(start))}`;
  return row;
};

interface TriggerRow {
  generation: number;
  reason: string;
  decided_at: Date;
  payload: {
    reason: string;
    upstreams: Record<string, { ratio: number; missing: Array<{ start: string; end: string }> }>;
  };
}
const triggers = (rollup: string, start: string) =>
  db.sql<TriggerRow[]>`
    select generation, reason, decided_at, payload from triggers
    where rollup_id = ${rollup} and period_lo = ${micros(at(start))} order by generation`;

/** Waits until the evaluator has recorded `ratio` for the period: the decision for that state is made. */
const evaluatedAt = (rollup: string, start: string, ratio: (r: PeriodRow) => boolean) =>
  waitFor(
    async () => {
      const row = await period(rollup, start);
      return row !== undefined && ratio(row) ? row : undefined;
    },
    { what: `${rollup} ${start} evaluated` },
  );

const ingestedAt = async (asset: string, start: string, end: string) => {
  const [row] = await db.sql<{ ingested_at: Date }[]>`
    select e.ingested_at from events e join assets a on a.id = e.asset_id
    where a.name = ${asset} and e.lo = ${micros(at(start))} and e.hi = ${micros(at(end))}`;
  return row!.ingested_at;
};

describe('ratio threshold', () => {
  it('exactly 0.98 of the hour (3528 s of 3600 s) triggers with reason ratio; one microsecond less does not', async () => {
    await send('p.ratio', '10:00:00', '10:58:48'); // 3528e6 µs of 3600e6
    await send('p.ratio', '11:00:00', '11:58:47.999999'); // 3528e6 - 1 µs
    const [trigger] = await waitFor(async () => {
      const rows = await triggers('ratio98', '10:00:00');
      return rows.length > 0 ? rows : undefined;
    });
    expect(trigger).toMatchObject({ generation: 1, reason: 'ratio' });
    expect(trigger!.payload.upstreams['p.ratio']).toEqual({
      ratio: 0.98,
      missing: [{ start: at('10:58:48'), end: at('11:00:00') }],
      replay_required: [],
      versions: ['v1'],
    });

    const below = await evaluatedAt('ratio98', '11:00:00', (r) => r.ratio > 0);
    expect(below.ratio).toBe(3527999999 / 3600e6);
    expect(below.state).toBe('waiting');
    expect(await triggers('ratio98', '11:00:00')).toEqual([]);

    // It was waiting, not stuck: the last microsecond completes it.
    await send('p.ratio', '11:58:47.999999', '12:00:00');
    const [covered] = await waitFor(async () => {
      const rows = await triggers('ratio98', '11:00:00');
      return rows.length > 0 ? rows : undefined;
    });
    expect(covered).toMatchObject({ generation: 1, reason: 'covered' });
    expect(await triggers('ratio98', '10:00:00')).toHaveLength(1);
  });
});

describe('max_missing', () => {
  it('72 s missing of an hour triggers under max_missing PT72S; 72.000001 s does not', async () => {
    await send('p.gap', '10:00:00', '10:30:00');
    await send('p.gap', '10:31:12', '11:00:00');
    await send('p.gap', '11:00:00', '11:30:00');
    await send('p.gap', '11:31:12.000001', '12:00:00');
    const [trigger] = await waitFor(async () => {
      const rows = await triggers('gap72', '10:00:00');
      return rows.length > 0 ? rows : undefined;
    });
    expect(trigger).toMatchObject({ generation: 1, reason: 'ratio' });
    expect(trigger!.payload.upstreams['p.gap']!.missing).toEqual([
      { start: at('10:30:00'), end: at('10:31:12') },
    ]);

    const below = await evaluatedAt('gap72', '11:00:00', (r) => r.ratio === (3600e6 - 72e6 - 1) / 3600e6);
    expect(below.state).toBe('waiting');
    expect(await triggers('gap72', '11:00:00')).toEqual([]);
  });
});

describe('settle', () => {
  it('is restarted by a newer event: the decision comes settle after the newest touching event', async () => {
    await send('p.settle', '10:00:00', '11:00:00');
    const settling = await evaluatedAt('settled', '10:00:00', (r) => r.state === 'settling');
    expect(await triggers('settled', '10:00:00')).toEqual([]);
    // A newer completion inside the hour while it settles (same coverage, a new event).
    await send('p.settle', '10:10:00', '10:20:00');
    const [trigger] = await waitFor(
      async () => {
        const rows = await triggers('settled', '10:00:00');
        return rows.length > 0 ? rows : undefined;
      },
      { what: 'settled trigger' },
    );
    const first = await ingestedAt('p.settle', '10:00:00', '11:00:00');
    const newest = await ingestedAt('p.settle', '10:10:00', '10:20:00');
    const satisfiedSince = settling.satisfied_since!;
    // The newer event came inside the settle window, so without a restart the decision would
    // have been due at satisfied_since + settle, before newest + settle.
    expect(newest.getTime()).toBeGreaterThanOrEqual(satisfiedSince.getTime());
    expect(newest.getTime()).toBeLessThan(satisfiedSince.getTime() + SETTLE_MS);
    expect(trigger!.decided_at.getTime()).toBeGreaterThanOrEqual(newest.getTime() + SETTLE_MS);
    expect(trigger!.decided_at.getTime()).toBeGreaterThanOrEqual(first.getTime() + SETTLE_MS);
    expect(trigger).toMatchObject({ generation: 1, reason: 'covered' });
    expect(await triggers('settled', '10:00:00')).toHaveLength(1);
    // The same in database time, to the microsecond.
    const [check] = await db.sql<{ ok: boolean; decided: string; newest: string }[]>`
      select t.decided_at >= max(e.ingested_at) + ${`${SETTLE_MS} milliseconds`}::interval as ok,
        t.decided_at::text as decided, max(e.ingested_at)::text as newest
      from triggers t, events e join assets a on a.id = e.asset_id
      where t.rollup_id = 'settled' and a.name = 'p.settle' and e.lo < t.period_lo + 3600000000 and e.hi > t.period_lo
      group by t.decided_at`;
    expect(check, JSON.stringify(check)).toMatchObject({ ok: true });
  });
});

describe('two upstreams', () => {
  it('does not trigger while one upstream lags, and triggers once both are satisfied', async () => {
    await send('p.orders', '10:00:00', '11:00:00');
    const one = await evaluatedAt('joined', '10:00:00', (r) => r.ratios['p.orders'] === 1);
    expect(one).toMatchObject({ state: 'waiting', ratio: 0, ratios: { 'p.orders': 1, 'p.payments': 0 } });
    expect(await triggers('joined', '10:00:00')).toEqual([]);

    await send('p.payments', '10:00:00', '10:30:00');
    const half = await evaluatedAt('joined', '10:00:00', (r) => r.ratios['p.payments'] === 0.5);
    expect(half).toMatchObject({ state: 'waiting', ratio: 0.5 });
    expect(await triggers('joined', '10:00:00')).toEqual([]);

    await send('p.payments', '10:30:00', '11:00:00');
    const [trigger] = await waitFor(async () => {
      const rows = await triggers('joined', '10:00:00');
      return rows.length > 0 ? rows : undefined;
    });
    expect(trigger).toMatchObject({ generation: 1, reason: 'covered' });
    expect(Object.keys(trigger!.payload.upstreams).sort()).toEqual(['p.orders', 'p.payments']);
    expect(trigger!.payload.upstreams['p.orders']!.ratio).toBe(1);
    expect(trigger!.payload.upstreams['p.payments']!.ratio).toBe(1);
    const last = await ingestedAt('p.payments', '10:30:00', '11:00:00');
    expect(trigger!.decided_at.getTime()).toBeGreaterThanOrEqual(last.getTime());
  });
});
