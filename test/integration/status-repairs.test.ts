/**
 * Open repairs on the status page: per asset, its open and partial requests, the asset
 * with the oldest request first, with the oldest time, the ranges still asked for and what they
 * miss; bounded (20 assets, the rest counted); following the page's focus and name filter; names
 * escaped. Requests are made through the scheduler's own verb (store/repairs/requests.ts makeRequests).
 */
import { describe, expect, it } from 'vitest';
import type { RepairRange } from '../../src/core/repair.js';
import { attemptPayload } from '../../src/core/repair-payload.js';
import { type MadeRequest, makeRequests } from '../../src/store/repairs/requests.js';
import { startTestDaemon, testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';

const HOSTILE = 'sr.<b>bold</b>';
const MINUTE_US = 60_000_000;
const T0 = Date.UTC(2026, 10, 2) * 1000; // µs
const db = await createTestDatabase();
const prefix = createTestPrefix();

const missing = (fromMinute: number, minutes: number): RepairRange => ({
  start: T0 + fromMinute * MINUTE_US,
  end: T0 + (fromMinute + minutes) * MINUTE_US,
  kind: 'missing',
  requiredVersion: null,
});
/** A request by hand on `asset`, made `hoursAgo` before now. */
async function request(asset: string, hoursAgo: number, ranges: RepairRange[]): Promise<number> {
  const now = new Date(Date.now() - hoursAgo * 3_600_000);
  const made: MadeRequest = {
    asset,
    domain: 'time',
    rollupId: null,
    periodLo: null,
    period: null,
    ranges,
    rangesTotal: ranges.length,
    missingTotal: ranges.reduce((n, r) => n + r.end - r.start, 0),
    attempts: 5,
    everyMs: 24 * 3_600_000,
    target: { type: 'queue', queue: 'sr-repairs' },
    leaseToken: null,
  };
  const [id] = await db.sql.begin((tx) =>
    makeRequests(tx, [made], now, (m, id) => attemptPayload(m, id, 1, m.ranges, now)),
  );
  return id!;
}

// 25 assets with one open request each, an hour apart: sr.a00 the oldest (30 h ago).
for (let i = 0; i < 25; i++) await request(`sr.a${String(i).padStart(2, '0')}`, 30 - i, [missing(i * 10, 5)]);
// The hostile name: an open request of 4 ranges (the oldest, 40 h ago) and a partial one.
await request(HOSTILE, 40, [missing(0, 5), missing(10, 5), missing(20, 5), missing(30, 15)]);
const partial = await request(HOSTILE, 1, [missing(100, 60)]);
await db.sql`update repair_requests set state = 'partial' where id = ${partial}`;
// Decided requests are not listed.
const done = await request('sr.done', 50, [missing(0, 5)]);
await db.sql`update repair_requests set state = 'repaired', finished_at = now(), next_at = null where id = ${done}`;

const config = testConfig(db, prefix, {
  rollups: [
    {
      id: 'sr_hourly',
      upstream: ['sr.a03', 'sr.a04'],
      every: 'hour',
      begin: '2026-11-02',
      target: { type: 'queue', queue: 'sr-runs' },
    },
  ],
});
const daemon = await startTestDaemon(config);

const page = async (path: string) => {
  const response = await daemon.http.inject({ url: path });
  expect(response.statusCode).toBe(200);
  return response.body;
};
/** The open repairs table's rows, in order: asset, open and partial counts. */
const repairRows = (body: string) =>
  [...body.matchAll(/<tr data-asset="([^"]+)" data-open="(\d+)" data-partial="(\d+)">/g)].map((m) =>
    m.slice(1).join(' '),
  );

describe('open repairs on the status page', () => {
  it('lists assets with open requests, the oldest first, bounded, with counts, times and ranges', async () => {
    const body = await page('/');
    const section = body.indexOf('<h2 id="open-repairs">');
    expect(section).toBeGreaterThan(0);
    expect(section).toBeLessThan(body.indexOf('<h2>Assets'));
    expect(body).toContain('27 requests open or partly covered on 26 assets');
    const rows = repairRows(body);
    expect(rows).toHaveLength(20);
    expect(rows[0]).toBe('sr.&lt;b&gt;bold&lt;/b&gt; 1 1');
    expect(rows.slice(1, 4)).toEqual(['sr.a00 1 0', 'sr.a01 1 0', 'sr.a02 1 0']);
    expect(body).toContain('and 6 more assets');
    expect(body).not.toContain('sr.done');
    expect(body).not.toContain('<b>bold</b>');
    // The hostile asset: oldest 40 h ago, 5 ranges (4 + 1) missing 1h 30m in all, the first three
    // ranges of its oldest request shown and the rest counted; a link to its requests.
    const from = body.indexOf('<tr data-asset="sr.&lt;b&gt;');
    const row = body.slice(from, body.indexOf('</tr>', from) + 5);
    expect(row).toMatch(/1d 16h ago/);
    expect(row).toContain('<td class="num">5</td><td class="num">1h 30m</td>');
    expect(row).toContain('2026-11-02 00:00 → 2026-11-02 00:05');
    expect(row).toContain('2026-11-02 00:20 → 2026-11-02 00:25');
    expect(row).not.toContain('2026-11-02 00:30 → ');
    expect(row).toContain('and 2 more');
    expect(row).toContain('href="/v1/repairs?asset=sr.%3Cb%3Ebold%3C%2Fb%3E"');
  });

  it('follows the focus and the name filter, and shows nothing when nothing is open there', async () => {
    expect(repairRows(await page('/?rollup=sr_hourly'))).toEqual(['sr.a03 1 0', 'sr.a04 1 0']);
    expect(repairRows(await page('/?q=A1'))).toEqual(Array.from({ length: 10 }, (_, i) => `sr.a1${i} 1 0`));
    // An asset page (an upstream no event has named yet: a rollup waits for it).
    const one = await page('/?asset=sr.a03');
    expect(repairRows(one)).toEqual(['sr.a03 1 0']);
    expect(one).toContain('1 request open or partly covered on 1 asset');
    expect(await page('/?q=nothing-like-it')).not.toContain('id="open-repairs"');
  });
});
