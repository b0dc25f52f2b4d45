/**
 * The status page of a large installation: one row per asset and rollup, paged, filtered by
 * name, stalest assets and most-missed rollups first, and small whatever the totals.
 */
import { describe, expect, it } from 'vitest';
import { startTestDaemon, testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';

const HOUR_US = 3_600_000_000;
const db = await createTestDatabase();
const prefix = createTestPrefix();
const now = Date.now() * 1000;

// 120 time assets whose coverage ends 1..120 hours ago, straight into the index (one segment each).
await db.sql`
  insert into assets (name, domain, zone, event_count, segment_count, covered_lo, covered_hi)
  select 'ov.asset.' || lpad(i::text, 3, '0'), 'time', 'UTC', 1, 1,
    ${now}::int8 - 200 * ${HOUR_US}::int8, ${now}::int8 - i * ${HOUR_US}::int8
  from generate_series(1, 120) as i`;
await db.sql`
  insert into segments (asset_id, span, version, state)
  select id, int8range(covered_lo, covered_hi), 'v1', 'complete' from assets`;
const target = { type: 'queue', queue: 'ov-runs' };
const config = testConfig(db, prefix, {
  // Five hours behind is stale for 005; a hundred is fresh for 100.
  assets: [
    { name: 'ov.asset.005', freshness: { max_lag: 'PT1H' } },
    { name: 'ov.asset.100', freshness: { max_lag: 'PT200H' } },
  ],
  rollups: [
    ...Array.from({ length: 29 }, (_, i) => ({
      id: `ov_r${String(i).padStart(2, '0')}`,
      upstream: [`ov.asset.${String(i + 1).padStart(3, '0')}`],
      every: 'hour',
      begin: new Date(now / 1000 - 24 * 3_600_000).toISOString(),
      target,
    })),
    {
      id: 'ov_unseen',
      upstream: ['ov.never.a', 'ov.never.b', 'ov.asset.003'],
      every: 'hour',
      begin: new Date(now / 1000 - 24 * 3_600_000).toISOString(),
      target,
    },
    {
      id: 'ov_late',
      upstream: ['ov.asset.120'],
      every: 'hour',
      begin: new Date(now / 1000 - 24 * 3_600_000).toISOString(),
      policy: { deadline: 'PT1H', on_deadline: 'miss' },
      target,
    },
  ],
});
const daemon = await startTestDaemon(config);

const page = async (path: string) => {
  const response = await daemon.http.inject({ url: path });
  expect(response.statusCode).toBe(200);
  return response.body;
};
/** Asset rows (or cards, under a dozen): not the links to upstreams in rollup rows. */
const assetNames = (body: string) =>
  [...body.matchAll(/<(?:tr|section class="card asset") data-asset="(ov\.asset\.\d+)"/g)].map((m) => m[1]);
const rollupIds = (body: string) => [...body.matchAll(/<tr data-rollup="(ov_\w+)"/g)].map((m) => m[1]);
/** A rollup row's "why waiting" cell, as text. */
const whyOf = (body: string, id: string) =>
  new RegExp(`<tr data-rollup="${id}">.*?<td class="why">(.*?)</td></tr>`)
    .exec(body)?.[1]
    ?.replace(/<[^>]+>/g, '');

describe('status page overview', () => {
  it('lists one row per asset and rollup, stalest and most missed first, in small pages', async () => {
    const body = await page('/');
    expect(body).toContain('<table class="overview">');
    expect(body).not.toContain('<svg');
    expect(body).toContain('1–50 of 120');
    const assets = assetNames(body);
    expect(assets).toHaveLength(50);
    expect(assets[0]).toBe('ov.asset.005'); // past its max_lag: stale, first
    expect(body).toMatch(
      /<tr data-asset="ov.asset.005" data-stale="true">.*?<span class="badge bad"[^>]*>stale<\/span>.*?<td class="num bad">5h<\/td>/,
    );
    expect(assets[1]).toBe('ov.asset.120'); // then the longest behind now
    expect(assets[49]).toBe('ov.asset.072');
    expect(body).toMatch(
      /<tr data-asset="ov.asset.100" data-stale="false">.*?<span class="badge ok">fresh<\/span>/,
    );
    expect(body).toMatch(
      /<tr data-asset="ov.asset.099" data-stale="unknown">.*?<td class="num ">4d 3h<\/td>/,
    );
    const rollups = rollupIds(body);
    expect(rollups).toHaveLength(31);
    expect(rollups[0]).toBe('ov_late'); // the only one with missed periods
    // Each row says why it waits: upstreams never seen, and how far behind now the others end.
    expect(whyOf(body, 'ov_late')).toBe('behind: ov.asset.120 5d');
    expect(whyOf(body, 'ov_r04')).toBe('behind: ov.asset.005 5h');
    expect(whyOf(body, 'ov_unseen')).toBe(
      '2 upstreams never seen: ov.never.a, ov.never.b · behind: ov.asset.003 3h',
    );
    expect(body).toContain('<a href="/?asset=ov.never.a">ov.never.a</a>');
    // Rollup ids sort naturally among equals (ov_r2 before ov_r10 would need no padding).
    expect(rollups.indexOf('ov_r09')).toBeLessThan(rollups.indexOf('ov_r10'));
    expect(Buffer.byteLength(body)).toBeLessThan(100_000);

    const third = await page('/?page=3');
    expect(assetNames(third)).toHaveLength(20);
    expect(third).toContain('101–120 of 120');
    expect(third).toContain('rel="prev"');
    expect(third).not.toContain('rel="next"');
  });

  it('filters by a part of the name, and focuses on one rollup with its timeline', async () => {
    const filtered = await page('/?q=asset.11');
    expect(assetNames(filtered)).toEqual([
      'ov.asset.119',
      'ov.asset.118',
      'ov.asset.117',
      'ov.asset.116',
      'ov.asset.115',
      'ov.asset.114',
      'ov.asset.113',
      'ov.asset.112',
      'ov.asset.111',
      'ov.asset.110',
    ]);
    const focused = await page('/?rollup=ov_late');
    expect(focused).toContain('<svg');
    expect(focused).toContain('data-rollup="ov_late"');
    // A focused rollup shows its upstreams, those never seen first, each saying so.
    const unseen = await page('/?rollup=ov_unseen');
    expect(unseen).toContain('1–3 of 3');
    expect(
      [...unseen.matchAll(/<section class="card asset" data-asset="([^"]+)"/g)].map((m) => m[1]),
    ).toEqual(['ov.never.a', 'ov.never.b', 'ov.asset.003']);
    expect(unseen.replace(/<[^>]+>/g, '')).toContain(
      'ov.never.a has never been seen: no event for it has been ingested yet. Rollup ov_unseen waits for it.',
    );
  });
});
