/**
 * The period gauges read when /metrics is scraped: a read that fails or comes late keeps the last
 * counts and warns once, not at every scrape; the first fresh read after it says so once.
 *
 * The read fails at the SQL level (its table renamed away) rather than by refusing connections:
 * postgres.js backs off between reconnect attempts with queries queued behind them, which would
 * make the recovery's timing the test's subject.
 */
import { Gauge } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';
import { defineRollups } from '../../src/config/rollups.js';
import { SCRAPE_WAIT_MS } from '../../src/metrics/bounded-scrape.js';
import { SnapshotGauge } from '../../src/metrics/lean-registry.js';
import { periodGaugeSource } from '../../src/metrics/period-gauges.js';
import { connect } from '../../src/store/pg/db.js';
import { createLogger } from '../../src/support/log.js';
import { testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';

const db = await createTestDatabase();
const config = testConfig(db, createTestPrefix(), {
  rollups: [
    {
      id: 'pg_gauges',
      upstream: ['pg.gauges.a'],
      every: 'hour',
      begin: '2026-01-01',
      policy: { deadline: 'PT1H', on_deadline: 'miss' },
      target: { type: 'queue', queue: 'pg-gauges-runs' },
    },
  ],
});
const pool = connect(db.url, { max: 2, applicationName: 'period-gauges-test' });
afterAll(() => pool.end({ timeout: 5 }));
interface Line {
  readonly level: number;
  readonly msg: string;
  readonly err?: { readonly code?: string };
  readonly waited_ms?: number;
  readonly stale_answers?: number;
}
const lines: Line[] = [];
const log = createLogger('debug', { write: (line: string) => lines.push(JSON.parse(line)) });
const source = periodGaugeSource(pool, () => defineRollups(config), log);
const periods = new SnapshotGauge({
  name: 'periods',
  help: 'test',
  labelNames: ['rollup', 'state'],
  registers: [],
});
const late = new Gauge({ name: 'late', help: 'test', labelNames: ['rollup'], registers: [] });

/** One scrape, as /metrics makes it; answers the waiting count it leaves in the gauge. */
async function scrape(): Promise<number | undefined> {
  await Promise.all([source.periods(periods), source.pastDeadline(late)]);
  const values = (await periods.get()).values;
  return values.find((v) => v.labels.rollup === 'pg_gauges' && v.labels.state === 'waiting')?.value;
}

/** The gauges' log lines since `from`, by level. */
function logged(from: number) {
  const mine = lines.slice(from).filter((l) => l.msg.startsWith('period gauges'));
  return {
    warn: mine.filter((l) => l.level === 40),
    info: mine.filter((l) => l.level === 30),
    debug: mine.filter((l) => l.level === 20),
  };
}

describe('period gauges when their read does not answer', () => {
  it('keep their last counts, warn once while the read fails and say once when it works again', async () => {
    const from = lines.length;
    const before = await scrape();
    expect(before).toBeGreaterThan(0);

    await db.sql`alter table periods rename to periods_away`;
    try {
      for (let i = 0; i < 3; i++) expect(await scrape()).toBe(before);
    } finally {
      await db.sql`alter table periods_away rename to periods`;
    }
    const failing = logged(from);
    expect(failing.warn).toEqual([
      expect.objectContaining({
        msg: 'period gauges not refreshed: /metrics serves their last values until a read succeeds',
        err: expect.objectContaining({ code: '42P01' }),
      }),
    ]);
    // Two reads a scrape (periods, past deadline), three scrapes: the other five at debug.
    expect(failing.debug.map((l) => l.msg)).toEqual(Array(5).fill('period gauges still not refreshed'));
    expect(failing.info).toEqual([]);

    expect(await scrape()).toBe(before);
    expect(await scrape()).toBe(before);
    const recovered = logged(from);
    expect(recovered.warn).toHaveLength(1);
    expect(recovered.info).toEqual([
      expect.objectContaining({ msg: 'period gauges refreshed again', stale_answers: 6 }),
    ]);
  });

  it('warn once, with how long they waited, while the read is blocked', async () => {
    const from = lines.length;
    const before = await scrape();
    await db.sql.begin(async (tx) => {
      await tx`lock table periods in access exclusive mode`;
      for (let i = 0; i < 2; i++) expect(await scrape()).toBe(before);
    });
    const blocked = logged(from);
    expect(blocked.warn).toEqual([expect.objectContaining({ waited_ms: SCRAPE_WAIT_MS })]);
    expect(blocked.debug).toHaveLength(3);
    expect(await scrape()).toBe(before);
    expect(logged(from).info).toEqual([expect.objectContaining({ stale_answers: 4 })]);
  });
});
