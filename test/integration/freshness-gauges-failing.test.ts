/**
 * The asset freshness gauges read when /metrics is scraped: a read that fails keeps the last facts
 * and computes lag and staleness from them at the scrape's time (a lag that grows, an asset that
 * turns stale), warns once, and says once when a read works again. The read fails at the SQL
 * level (its table renamed away), as in period-gauges-failing.test.ts.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { normalizeEvent } from '../../src/core/events/events.js';
import { freshnessGauges } from '../../src/metrics/freshness-gauges.js';
import { createMetrics } from '../../src/metrics/registry.js';
import { commitEvents } from '../../src/store/assets/commit.js';
import { connect } from '../../src/store/pg/db.js';
import { createLogger } from '../../src/support/log.js';
import { testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';

const MINUTE = 60_000;
const END = Date.UTC(2026, 0, 1, 12);
const db = await createTestDatabase();
const config = testConfig(db, createTestPrefix(), {
  assets: [{ name: 'fg.a', domain: 'time', freshness: { max_lag: 'PT20M' } }],
});
await commitEvents(db.sql, [
  normalizeEvent(
    { asset: 'fg.a', start: '2026-01-01T00:00:00Z', end: new Date(END).toISOString(), id: 'e1' },
    { maxPayloadBytes: 65_536, assets: new Map([['fg.a', { domain: 'time', zone: undefined }]]) },
  ),
]);
const pool = connect(db.url, { max: 2, applicationName: 'freshness-gauges-test' });
afterAll(() => pool.end({ timeout: 5 }));
interface Line {
  readonly level: number;
  readonly msg: string;
  readonly err?: { readonly code?: string };
  readonly stale_answers?: number;
}
const lines: Line[] = [];
const log = createLogger('debug', { write: (line: string) => lines.push(JSON.parse(line)) });
const metrics = createMetrics();
const refresh = freshnessGauges(pool, config, metrics, log);

/** One scrape at `nowMs`: the asset's lag and stale gauges. */
async function scrape(nowMs: number): Promise<{ lag?: number; stale?: number }> {
  await refresh(nowMs);
  const lag = (await metrics.assetLag.get()).values.find((v) => v.labels.asset === 'fg.a')?.value;
  const stale = (await metrics.assetStale.get()).values.find((v) => v.labels.asset === 'fg.a')?.value;
  return { lag, stale };
}

const logged = (from: number) => lines.slice(from).filter((l) => l.msg.startsWith('asset freshness gauges'));

describe('asset freshness gauges when their read fails', () => {
  it('age the last facts, warn once, and say once when a read works again', async () => {
    const from = lines.length;
    expect(await scrape(END + 5 * MINUTE)).toEqual({ lag: 300, stale: 0 });

    await db.sql`alter table assets rename to assets_away`;
    try {
      expect(await scrape(END + 10 * MINUTE)).toEqual({ lag: 600, stale: 0 });
      expect(await scrape(END + 30 * MINUTE)).toEqual({ lag: 1800, stale: 1 });
    } finally {
      await db.sql`alter table assets_away rename to assets`;
    }
    expect(logged(from).map((l) => [l.level, l.msg, l.err?.code])).toEqual([
      [
        40,
        'asset freshness gauges not refreshed: /metrics serves their last values until a read succeeds',
        '42P01',
      ],
      [20, 'asset freshness gauges still not refreshed', '42P01'],
    ]);

    expect(await scrape(END + 6 * MINUTE)).toEqual({ lag: 360, stale: 0 });
    expect(logged(from).slice(2)).toEqual([
      expect.objectContaining({ level: 30, msg: 'asset freshness gauges refreshed again', stale_answers: 2 }),
    ]);
  });
});
