/**
 * Bounded coverage answers on a many-hole asset, and per-asset freshness, over HTTP
 * against a whole daemon and its own database.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { projectCoverage } from '../../src/core/coverage.js';
import { type ListOrders, toCoverageAnswer } from '../../src/core/coverage-answer.js';
import { normalizeEvent } from '../../src/core/events.js';
import type { Interval } from '../../src/core/types.js';
import type { Daemon } from '../../src/daemon/daemon.js';
import { findAsset } from '../../src/store/assets/assets.js';
import { commitEvents } from '../../src/store/assets/commit.js';
import { queryCoverage } from '../../src/store/assets/coverage-query.js';
import { segmentsOverlapping } from '../../src/store/assets/segments-sql.js';
import { startTestDaemon, testConfig } from '../helpers/daemon.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';

const T0 = Date.UTC(2026, 0, 1);
const MINUTE = 60_000;
const SLICES = 1500;
const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');
const at = (minute: number) => iso(T0 + minute * MINUTE);
const YEAR = { start: at(0), end: iso(Date.UTC(2027, 0, 1)) };

let db: TestDatabase;
let daemon: Daemon;

async function commit(events: Array<Record<string, unknown>>): Promise<void> {
  const normalized = events.map((e) => normalizeEvent(e, { maxPayloadBytes: 65_536 }));
  for (let i = 0; i < normalized.length; i += 500) await commitEvents(db.sql, normalized.slice(i, i + 500));
}

beforeAll(async () => {
  db = await createTestDatabase();
  daemon = await startTestDaemon(
    testConfig(db, createTestPrefix(), {
      assets: [
        { name: 'fresh.recent', freshness: { max_lag: 'PT20M' } },
        { name: 'fresh.late', freshness: { max_lag: 'PT20M' } },
        { name: 'fresh.offsets', freshness: { max_lag: 'PT1H' } },
        { name: 'fresh.declared', domain: 'time', freshness: { max_lag: 'PT20M' } },
      ],
    }),
  );
  // holey: one-minute slices every other minute; every 100th hole filled at v2 (segments that
  // touch without a gap), every 50th slice condemned by a replay requirement at v9.
  const events: Array<Record<string, unknown>> = [];
  for (let k = 0; k < SLICES; k++) {
    events.push({ asset: 'holey', start: at(2 * k), end: at(2 * k + 1), version: 'v1', id: `s${k}` });
    if (k % 100 === 0)
      events.push({ asset: 'holey', start: at(2 * k + 1), end: at(2 * k + 2), version: 'v2', id: `f${k}` });
  }
  for (let k = 25; k < SLICES; k += 50)
    events.push({
      type: 'replay_requirement',
      asset: 'holey',
      start: at(2 * k),
      end: at(2 * k + 1),
      version: 'v9',
    });
  // lumpy: dense at the start, sparse after (the lists' reads must widen past a uniform guess).
  for (let k = 0; k < 1200; k++)
    events.push({ asset: 'lumpy', start: at(2 * k), end: at(2 * k + 1), id: `d${k}` });
  for (let k = 1; k <= 10; k++)
    events.push({ asset: 'lumpy', start: at(3000 * k), end: at(3000 * k + 5), id: `p${k}` });
  const now = Date.now();
  events.push(
    { asset: 'fresh.recent', start: iso(now - 3_600_000), end: iso(now - 5 * MINUTE) },
    { asset: 'fresh.late', start: iso(now - 3 * 3_600_000), end: iso(now - 3_600_000) },
    { asset: 'fresh.offsets', start: 0, end: 4096 },
  );
  await commit(events);
});

interface Reply {
  status: number;
  body: Record<string, unknown>;
  bytes: number;
}

async function get(path: string): Promise<Reply> {
  const res = await fetch(`${daemon.url}${path}`);
  const text = await res.text();
  return {
    status: res.status,
    body: JSON.parse(text) as Record<string, unknown>,
    bytes: Buffer.byteLength(text),
  };
}

const coverage = (asset: string, query: Record<string, string>) =>
  get(`/v1/assets/${encodeURIComponent(asset)}/coverage?${new URLSearchParams(query)}`);

type Span = { start: string; end: string };

/** The whole answer, unbounded, from the pure projection of every overlapping segment. */
async function fullAnswer(asset: string, window: Interval) {
  const row = (await findAsset(db.sql, asset))!;
  const segments = await segmentsOverlapping(db.sql, row.id, window);
  const extent = { start: row.covered_lo!, end: row.covered_hi! };
  return projectCoverage({ window, segments, extent, limit: 1e9 });
}

describe('a coverage answer over many holes', () => {
  const holes = SLICES - SLICES / 100; // the last one runs to the window's end
  const replays = SLICES / 50;

  it('bounds every list to the default limit of 200, with exact totals and a truncated flag', async () => {
    const reply = await coverage('holey', YEAR);
    expect(reply.status).toBe(200);
    const a = reply.body;
    const end = Date.UTC(2027, 0, 1);
    const complete = (SLICES + SLICES / 100 - replays) * MINUTE;
    expect(a).toMatchObject({
      covered: false,
      ratio: complete / (end - T0),
      missing_count: holes,
      missing_total: (end - T0 - (SLICES + SLICES / 100) * MINUTE) / 1000,
      known_gaps_count: holes - 1,
      replay_required_count: replays,
      truncated: true,
    });
    for (const list of ['missing', 'known_gaps', 'batches'] as const)
      expect((a[list] as unknown[]).length, list).toBe(200);
    expect(a.replay_required as unknown[]).toHaveLength(replays);
    // Oldest first; the filled hole after slice 0 is no hole.
    expect((a.missing as Span[]).slice(0, 2)).toEqual([
      { start: at(3), end: at(4) },
      { start: at(5), end: at(6) },
    ]);
    // Batches keep their order: the pieces nearest the window's end, latest first.
    expect((a.batches as unknown[])[0]).toEqual({
      start: at(2 * SLICES - 1),
      end: YEAR.end,
      state: 'gap',
      version: null,
    });
    expect(reply.bytes).toBeLessThan(100_000);
  });

  it('order=newest starts every list at the window end; limit bounds each list', async () => {
    const a = (await coverage('holey', { ...YEAR, order: 'newest', limit: '3' })).body;
    expect(a.missing).toEqual([
      { start: at(2 * SLICES - 1), end: YEAR.end },
      { start: at(2 * SLICES - 3), end: at(2 * SLICES - 2) },
      { start: at(2 * SLICES - 5), end: at(2 * SLICES - 4) },
    ]);
    expect(a.known_gaps).toEqual(
      (a.missing as Span[]).slice(1).concat([{ start: at(2 * SLICES - 7), end: at(2 * SLICES - 6) }]),
    );
    expect((a.replay_required as Span[])[0]).toMatchObject({
      start: at(2 * 1475),
      version: 'v1',
      required_version: 'v9',
    });
    expect(a).toMatchObject({ missing_count: holes, replay_required_count: replays, truncated: true });
    const none = (await coverage('holey', { ...YEAR, limit: '0' })).body;
    expect(none).toMatchObject({
      missing: [],
      known_gaps: [],
      replay_required: [],
      batches: [],
      missing_count: holes,
    });
  });

  it('pages through every hole by moving the window start past the last one returned', async () => {
    const all: Span[] = [];
    let start = YEAR.start;
    for (let page = 0; page < 10; page++) {
      const a = (await coverage('holey', { start, end: YEAR.end, limit: '1000' })).body;
      all.push(...(a.missing as Span[]));
      if ((a.missing as Span[]).length === a.missing_count) break;
      start = all[all.length - 1]!.end;
    }
    const full = await fullAnswer('holey', { start: T0 * 1000, end: Date.UTC(2027, 0, 1) * 1000 });
    expect(all).toHaveLength(holes);
    expect(all).toEqual(full.missing.map((m) => ({ start: iso(m.start / 1000), end: iso(m.end / 1000) })));
  });

  it('agrees with the full projection cut to the limit, for windows anywhere and either order', async () => {
    const windows: Array<[string, number, number]> = [
      ['holey', -10, 5],
      ['holey', 0, 2 * SLICES],
      ['holey', 199, 203],
      ['holey', 200, 1234],
      ['holey', 2 * SLICES - 7, 2 * SLICES + 40],
      ['holey', 50.5, 50.5 + 2],
      ['holey', 2 * SLICES + 1, 2 * SLICES + 9],
      ['lumpy', -5, 40_000],
      ['lumpy', 300, 27_000],
    ];
    for (const [asset, from, to] of windows) {
      const row = (await findAsset(db.sql, asset))!;
      const window = { start: (T0 + from * MINUTE) * 1000, end: (T0 + to * MINUTE) * 1000 };
      const full = await fullAnswer(asset, window);
      const pieces = [...full.batches].reverse();
      for (const orders of [undefined, { ranges: 'newest', batches: 'newest' }] as Array<
        ListOrders | undefined
      >) {
        for (const limit of [0, 1, 7, 200]) {
          const got = await queryCoverage(db.sql, row, { window, limit, orders });
          const cut = <T>(list: T[], newest: boolean) =>
            (newest ? [...list].reverse() : list).slice(0, limit);
          const newest = orders?.ranges === 'newest';
          const what = JSON.stringify({ asset, from, to, orders, limit });
          expect(got.missing, what).toEqual(cut(full.missing, newest));
          expect(got.knownGaps, what).toEqual(cut(full.knownGaps, newest));
          expect(got.replayRequired, what).toEqual(cut(full.replayRequired, newest));
          expect(got.batches, what).toEqual(cut(pieces, orders === undefined || newest));
          expect(got, what).toMatchObject({
            covered: full.covered,
            ratio: full.ratio,
            missingCount: full.missing.length,
            knownGapsCount: full.knownGaps.length,
            replayRequiredCount: full.replayRequired.length,
          });
        }
      }
    }
  });

  it('refuses an order other than oldest or newest', async () => {
    const reply = await coverage('holey', { ...YEAR, order: 'latest' });
    expect(reply).toMatchObject({ status: 400, body: { code: 'invalid_order' } });
  });
});

describe('freshness', () => {
  it('the coverage answer names covered_until, the lag and the last event', async () => {
    const a = (await coverage('holey', YEAR)).body;
    expect(a).toMatchObject({
      covered_until: at(2 * SLICES - 1),
      last_event_at: expect.stringMatching(/^\d{4}-.*Z$/),
      max_lag: null,
      stale: null,
    });
    // Holes before covered_until are gaps, not lag: the lag runs from the newest complete end.
    const lag = a.lag_seconds as number;
    expect(Math.abs(lag - (Date.now() - (T0 + (2 * SLICES - 1) * MINUTE)) / 1000)).toBeLessThan(600);
  });

  it('/v1/assets tells fresh from stale against each asset max_lag', async () => {
    const assets = (await get('/v1/assets')).body.assets as Array<Record<string, unknown>>;
    const byName = new Map(assets.map((a) => [a.asset, a]));
    expect(byName.get('fresh.recent')).toMatchObject({ max_lag: 'PT20M', stale: false, stale_reason: null });
    expect((byName.get('fresh.recent')!.lag_seconds as number) >= 300).toBe(true);
    expect(byName.get('fresh.late')).toMatchObject({
      max_lag: 'PT20M',
      stale: true,
      stale_reason: expect.stringMatching(/^covered until .*, PT1H(\d+S)? ago, more than max_lag PT20M$/),
    });
    // Integer assets have no lag; their expectation is on the time since their last event.
    expect(byName.get('fresh.offsets')).toMatchObject({
      covered_until: 4096,
      lag_seconds: null,
      stale: false,
    });
    expect(byName.get('fresh.declared')).toMatchObject({
      covered_until: null,
      lag_seconds: null,
      last_event_at: null,
      stale: true,
      stale_reason: 'nothing is covered yet (max_lag PT20M)',
    });
    expect(byName.get('holey')).toMatchObject({
      covered_until: at(2 * SLICES - 1),
      max_lag: null,
      stale: null,
    });
  });

  it('exports the lag and staleness as gauges per asset', async () => {
    const text = await (await fetch(`${daemon.url}/metrics`)).text();
    expect(text).toMatch(/^coverage_rollup_asset_stale\{asset="fresh\.late"\} 1$/m);
    expect(text).toMatch(/^coverage_rollup_asset_stale\{asset="fresh\.recent"\} 0$/m);
    expect(text).toMatch(/^coverage_rollup_asset_stale\{asset="fresh\.declared"\} 1$/m);
    expect(text).not.toMatch(/coverage_rollup_asset_stale\{asset="holey"\}/);
    const lag = Number(/^coverage_rollup_asset_lag_seconds\{asset="fresh\.late"\} (\S+)$/m.exec(text)?.[1]);
    expect(lag).toBeGreaterThanOrEqual(3600);
    expect(text).not.toMatch(/coverage_rollup_asset_lag_seconds\{asset="fresh\.offsets"\}/);
  });

  it('covered_until is the end of the newest complete coverage, below a replay_required top', async () => {
    await commit([
      { asset: 'fresh.condemned', start: at(0), end: at(10), version: 'v1' },
      { type: 'replay_requirement', asset: 'fresh.condemned', start: at(5), end: at(10), version: 'v2' },
    ]);
    const row = (await findAsset(db.sql, 'fresh.condemned'))!;
    const window = { start: T0 * 1000, end: (T0 + 10 * MINUTE) * 1000 };
    const got = await queryCoverage(db.sql, row, { window, limit: 10 });
    const answer = toCoverageAnswer(
      { asset: row.name, domain: 'time', window, coverage: got, ...got },
      Date.now(),
    );
    expect(answer.covered_until).toBe(at(5));
  });
});
