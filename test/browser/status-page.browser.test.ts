/**
 * The status page in a real browser (Debian's chromium through playwright-core): it renders, a
 * stale asset comes first with its lag, the known gap sits at its place on the timeline, rollup
 * strips show triggered periods and partial periods apart from empty ones, the period page says
 * why a period waits, and screenshots land in test-artifacts/ for a human to look at.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Daemon } from '../../src/daemon/daemon.js';
import { startTestDaemon, testConfig, testProducer } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM);
if (!available) {
  console.warn(`status page browser test skipped: ${CHROMIUM} is missing (apt-get install -y chromium)`);
}
const HOSTILE = '<script>alert(1)</script>';
const ARTIFACTS = 'test-artifacts';

const day = (d: number, hhmm: string) => `2025-06-0${d}T${hhmm}:00Z`;
const event = (asset: string, start: string, end: string, version = 'v1') => ({
  name: 'e',
  data: { asset, start, end, version },
});

/** The page's globals, as the callbacks that run in it see them (the tests compile without DOM types). */
type InPage = {
  document: { elementFromPoint(x: number, y: number): unknown };
  getComputedStyle(element: unknown): { fill: string; fillOpacity: string };
};

const HOUR_MS = 3_600_000;
const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');
const hourKey = (ms: number) => iso(ms).slice(0, 13);
// Fixed at start: the keys the assertions name stay right should the hour turn during the run.
const startedAt = Date.now();
/** Start of the current UTC hour. */
const H = Math.floor(startedAt / HOUR_MS) * HOUR_MS;
const MINUTE_NOW = Math.floor(startedAt / 60_000) * 60_000;

/** Two days of hourly slices of warehouse.orders, with a 2-hour hole and a 20-minute one. */
function orders(): ReturnType<typeof event>[] {
  const out: ReturnType<typeof event>[] = [];
  for (let h = 0; h < 48; h++) {
    const start = new Date(Date.UTC(2025, 5, 1, h)).toISOString();
    const end = new Date(Date.UTC(2025, 5, 1, h + 1)).toISOString();
    if (h === 3 || h === 4) continue;
    if (h === 34) {
      out.push(
        event('warehouse.orders', start, day(2, '10:20')),
        event('warehouse.orders', day(2, '10:40'), end),
      );
    } else out.push(event('warehouse.orders', start, end));
  }
  return out;
}

async function setUp(): Promise<{ daemon: Daemon; browser: Browser; page: Page }> {
  const db = await createTestDatabase();
  const prefix = createTestPrefix();
  const target = { type: 'queue', queue: 'status-browser-runs' };
  const config = testConfig(db, prefix, {
    assets: [
      { name: 'stale.feed', freshness: { max_lag: 'PT1H' } },
      { name: 'live.feed', freshness: { max_lag: 'PT3H' } },
    ],
    rollups: [
      {
        id: 'live_hourly',
        upstream: 'live.feed',
        every: 'hour',
        begin: iso(H - 3 * HOUR_MS),
        policy: { deadline: 'PT6H', on_deadline: 'miss' },
        target,
      },
      { id: 'orders_hourly', upstream: 'warehouse.orders', every: 'hour', begin: '2025-06-01', target },
      {
        id: 'orders_daily',
        upstream: ['warehouse.orders', 'warehouse.payments'],
        every: 'day',
        timezone: 'Europe/Berlin',
        begin: '2025-06-01',
        policy: { deadline: 'PT6H', on_deadline: 'miss' },
        target,
      },
      {
        id: 'payments_settled',
        upstream: 'warehouse.payments',
        every: 'hour',
        begin: '2025-06-01',
        policy: { settle: 'PT1H' },
        target,
      },
    ],
  });
  const daemon = await startTestDaemon(config);
  const producer = testProducer(config);
  await producer.addBulk([
    ...orders(),
    event('warehouse.payments', day(1, '00:00'), day(2, '20:00')),
    event(HOSTILE, day(1, '06:00'), day(2, '06:00')),
    // A feed that stopped 23.5 hours ago, and one whose last hour is half there.
    event('stale.feed', iso(MINUTE_NOW - 48 * HOUR_MS), iso(MINUTE_NOW - 23.5 * HOUR_MS)),
    event('live.feed', iso(H - 3 * HOUR_MS), iso(H - 0.5 * HOUR_MS)),
  ]);
  const period = async (rollup: string, key: string) => {
    const rows = await db.sql<{ state: string; generation: number }[]>`
      select state, generation from periods where rollup_id = ${rollup} and key = ${key}`;
    return rows[0];
  };
  // Newest periods are decided first: wait for the last hour and for every older one to be decided,
  // so the rerun below is the latest decision.
  await waitFor(
    async () =>
      (await period('orders_hourly', '2025-06-02T16'))?.state === 'triggered' &&
      (await db.sql`select 1 from periods where rollup_id = 'orders_hourly' and dirty`).length === 0,
    { what: 'orders_hourly triggered' },
  );
  // Reprocessing: hours 15 and 16 must be rebuilt at v2; hour 15 is, hour 16 waits.
  const requirement = { type: 'replay_requirement', asset: 'warehouse.orders', version: 'v2' };
  await producer.add('r', { ...requirement, start: day(2, '15:00'), end: day(2, '17:00') });
  await waitFor(async () => (await period('orders_hourly', '2025-06-02T16'))?.state === 'rerun_pending', {
    what: 'rerun pending',
  });
  await producer.add('e', event('warehouse.orders', day(2, '15:00'), day(2, '16:00'), 'v2').data);
  await waitFor(async () => (await period('orders_hourly', '2025-06-02T15'))?.generation === 2, {
    what: 'rerun of hour 15',
  });
  await waitFor(async () => (await period('payments_settled', '2025-06-01T00'))?.state === 'settling', {
    what: 'settling',
  });
  await waitFor(
    async () =>
      (await period('live_hourly', hourKey(H - 2 * HOUR_MS)))?.state === 'triggered' &&
      (await period('live_hourly', hourKey(H - HOUR_MS)))?.state === 'waiting',
    { what: 'live_hourly decided' },
  );

  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  afterAll(() => browser.close());
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('dialog', () => {
    throw new Error('the page opened a dialog: escaping failed');
  });
  return { daemon, browser, page };
}

const env = available ? await setUp() : undefined;

/**
 * A platform-scale installation straight into the index: 10,000 time assets (asset i ends i % 48
 * hours before now) and 1,000 hourly rollups over two of them each; every fifth rollup's upstreams
 * were never seen. No scheduler: the overview reads counts, not decisions.
 */
async function setUpLarge(): Promise<Daemon> {
  const db = await createTestDatabase();
  const nowUs = Date.now() * 1000;
  await db.sql`
    insert into assets (name, domain, zone, event_count, segment_count, covered_lo, covered_hi)
    select 'big.a' || i, 'time', 'UTC', 1, 1, ${nowUs}::int8 - 100 * ${HOUR_MS * 1000}::int8,
      ${nowUs}::int8 - (i % 48) * ${HOUR_MS * 1000}::int8
    from generate_series(0, 9999) as i`;
  await db.sql`
    insert into segments (asset_id, span, version, state)
    select id, int8range(covered_lo, covered_hi), 'v1', 'complete' from assets`;
  const config = testConfig(db, createTestPrefix(), {
    scheduler: { enabled: false },
    rollups: Array.from({ length: 1000 }, (_, i) => ({
      id: `r${i}`,
      upstream: i % 5 === 0 ? [`never.${i}.x`, `never.${i}.y`] : [`big.a${2 * i}`, `big.a${2 * i + 1}`],
      every: 'hour',
      begin: iso(H - 10 * 24 * HOUR_MS),
      target: { type: 'queue', queue: 'status-browser-runs' },
    })),
  });
  return startTestDaemon(config);
}

const large = available ? await setUpLarge() : undefined;

/** Where each cell's content sits (not the cell: a cell spans its column whatever its alignment). */
type Box = { left: number; right: number; text: string };
type InTable = {
  document: {
    querySelectorAll(selector: string): Iterable<{ textContent: string; className: string }>;
    createRange(): {
      selectNodeContents(node: unknown): void;
      getBoundingClientRect(): { left: number; right: number };
    };
  };
};

describe.skipIf(!available)(
  `status page in chromium${available ? '' : ' (skipped: no /usr/bin/chromium)'}`,
  () => {
    const { daemon, page } = env ?? ({} as NonNullable<typeof env>);
    const errors: string[] = [];
    beforeAll(() => {
      page.on('pageerror', (error) => errors.push(error.message));
      page.on('console', (message) => {
        if (message.type() === 'error') errors.push(message.text());
      });
      mkdirSync(ARTIFACTS, { recursive: true });
    });

    it('renders every asset and rollup, and saves a screenshot', async () => {
      const response = await page.goto(`${daemon.url}/`);
      expect(response?.status()).toBe(200);
      await expect(page.title()).resolves.toBe('coverage-rollup status');
      for (const name of ['warehouse.orders', 'warehouse.payments', HOSTILE]) {
        await expect(page.locator('h3', { hasText: name }).count()).resolves.toBe(1);
      }
      await expect(page.locator('meta[http-equiv="refresh"]').getAttribute('content')).resolves.toBe('60');
      for (const id of ['orders_hourly', 'orders_daily', 'payments_settled', 'live_hourly']) {
        await expect(page.locator(`[data-rollup="${id}"] svg.track`).count()).resolves.toBe(1);
      }
      await page.screenshot({ path: `${ARTIFACTS}/status-page.png`, fullPage: true });
      expect(errors).toEqual([]);
    });

    it('draws the known gap where it lies in the window', async () => {
      await page.goto(`${daemon.url}/?window=1d&end=2025-06-03T00:00:00Z`);
      const card = page.locator('[data-asset="warehouse.orders"]');
      const plot = (await card.locator('rect[data-role="plot"]').boundingBox())!;
      const gap = (await card
        .locator('rect[data-state="gap"][data-start="2025-06-02T10:20:00Z"][data-end="2025-06-02T10:40:00Z"]')
        .boundingBox())!;
      // The window is the day ending at 2025-06-03T00:00Z.
      const minutes = 24 * 60;
      expect(Math.abs(gap.x - plot.x - ((10 * 60 + 20) / minutes) * plot.width)).toBeLessThan(2);
      expect(Math.abs(gap.width - (20 / minutes) * plot.width)).toBeLessThan(2);
      await expect(card.locator('li[data-state="gap"]').count()).resolves.toBe(1);
      await expect(card.locator('li[data-state="replay_required"]').count()).resolves.toBe(1);
      await page.screenshot({ path: `${ARTIFACTS}/status-page-1d.png`, fullPage: true });
    });

    it('shows triggered periods with their generation, and the other period states', async () => {
      await page.goto(`${daemon.url}/?rollup=orders_hourly&window=1d&end=2025-06-03T00:00:00Z`);
      const strip = page.locator('[data-rollup="orders_hourly"]');
      const rerun = strip.locator('rect[data-state="triggered"][data-key="2025-06-02T15"]');
      await expect(rerun.getAttribute('data-generation')).resolves.toBe('2');
      await expect(
        strip.locator('rect[data-state="triggered"][data-generation="1"]').count(),
      ).resolves.toBeGreaterThan(10);
      await expect(strip.locator('rect[data-state="rerun_pending"]').count()).resolves.toBe(1);
      await expect(strip.locator('text.bar-text', { hasText: '#2' }).count()).resolves.toBe(1);
      await expect(strip.locator('.last').textContent()).resolves.toMatch(/last trigger: replay at .* #2/);
      await page.goto(`${daemon.url}/?start=2025-05-27T00:00:00Z&end=2025-06-03T00:00:00Z`);
      await expect(
        page.locator('[data-rollup="orders_daily"] rect[data-state="missed"]').count(),
      ).resolves.toBe(3);
      await expect(
        page.locator('[data-rollup="payments_settled"] rect[data-state="settling"]').count(),
      ).resolves.toBeGreaterThan(0);
    });

    it('shows a stale asset first, with its lag, on an axis ending at now; a fresh one folded away', async () => {
      await page.goto(`${daemon.url}/`);
      const first = page.locator('section.card.asset').first();
      await expect(first.getAttribute('data-asset')).resolves.toBe('stale.feed');
      await expect(first.getAttribute('data-stale')).resolves.toBe('true');
      await expect(first.locator('.badge').textContent()).resolves.toBe('stale');
      await expect(first.locator('.lag').textContent()).resolves.toMatch(/^23h 3\dm behind now$/);
      const lag = Number(await first.locator('.lag').getAttribute('data-lag-seconds'));
      expect(lag).toBeGreaterThanOrEqual(23.5 * 3600);
      expect(lag).toBeLessThan(23.5 * 3600 + 600);
      // The bar is red from the end of its coverage to the now marker at the window's end.
      const plot = (await first.locator('rect[data-role="plot"]').boundingBox())!;
      const now = (await first.locator('line[data-role="now"]').boundingBox())!;
      expect(Math.abs(now.x - (plot.x + plot.width))).toBeLessThan(2);
      const behind = first.locator('rect[data-state="behind"]');
      const box = (await behind.boundingBox())!;
      expect(Math.abs(box.x + box.width - (plot.x + plot.width))).toBeLessThan(2);
      expect(Math.abs(box.width / plot.width - 23.5 / 24)).toBeLessThan(0.01);
      expect(await behind.evaluate((el) => (globalThis as unknown as InPage).getComputedStyle(el).fill)).toBe(
        'rgb(229, 143, 136)',
      );
      // Every time card shares the window ending at now.
      const ends = await page
        .locator('section.card svg.track')
        .evaluateAll((svgs) => svgs.map((svg) => svg.getAttribute('data-window-end')));
      expect(new Set(ends).size).toBe(1);
      // The fresh feed is healthy: folded under one closed line.
      const healthy = page.locator('details.healthy [data-asset="live.feed"]');
      await expect(healthy.count()).resolves.toBe(1);
      await expect(healthy.isVisible()).resolves.toBe(false);
      await page.screenshot({ path: `${ARTIFACTS}/status-page-now.png`, fullPage: true });
    });

    it('shades a partial period apart from an empty one, and links it to its why', async () => {
      // A window holding the whole current hour: one ending at now would draw it as thin as the
      // minutes it has run, and this test must not depend on the minute it runs at.
      await page.goto(
        `${daemon.url}/?rollup=live_hourly&start=${iso(H - 3 * HOUR_MS)}&end=${iso(H + HOUR_MS)}`,
      );
      const strip = page.locator('[data-rollup="live_hourly"] svg.track');
      const partial = strip.locator(`rect[data-key="${hourKey(H - HOUR_MS)}"]`);
      const empty = strip.locator(`rect[data-state="waiting"][data-start="${iso(H)}"]`);
      await expect(partial.getAttribute('data-ratio')).resolves.toBe('0.5');
      const nowX = (await strip.locator('line.now').boundingBox())!.x;
      // What the eye sees near the bottom of each period (away from the now marker): the complete
      // share, or the grey of nothing.
      const colourNearBottom = async (rect: typeof partial) => {
        const b = (await rect.boundingBox())!;
        const [left, right] = [b.x + b.width / 4, b.x + (3 * b.width) / 4];
        return page.evaluate(
          ([x, y]) => {
            const w = globalThis as unknown as InPage;
            const style = w.getComputedStyle(w.document.elementFromPoint(x!, y!));
            return `${style.fill} ${style.fillOpacity}`;
          },
          [Math.abs(left - nowX) > Math.abs(right - nowX) ? left : right, b.y + b.height - 3],
        );
      };
      await expect(colourNearBottom(partial)).resolves.toBe('rgb(47, 158, 90) 0.75');
      await expect(colourNearBottom(empty)).resolves.toBe('rgb(182, 188, 198) 1');
      // Only the upper half of the partial period is grey.
      const shade = (await strip.locator('rect.fill').boundingBox())!;
      expect(Math.abs(shade.height / (await partial.boundingBox())!.height - 0.5)).toBeLessThan(0.05);
      await expect(page.locator('[data-rollup="live_hourly"] .headline').textContent()).resolves.toMatch(
        new RegExp(`1 period waiting past its end · current period ${hourKey(H)} waiting \\(0\u00a0%\\)`),
      );
      await page.screenshot({ path: `${ARTIFACTS}/status-page-rollup.png`, fullPage: true });
      await partial.click();
      await page.waitForURL(`**/rollups/live_hourly/periods/${hourKey(H - HOUR_MS)}`);
    });

    it('explains why a period waits: which upstream misses what, and its deadline', async () => {
      const key = hourKey(H - HOUR_MS);
      const response = await page.goto(`${daemon.url}/rollups/live_hourly/periods/${key}`);
      expect(response?.status()).toBe(200);
      const card = page.locator('section.period');
      await expect(card.getAttribute('data-state')).resolves.toBe('waiting');
      await expect(card.locator('p.facts').textContent()).resolves.toMatch(
        / \(ended (\d+m( \d+s)?|\d+s) ago\) /,
      );
      const why = page.locator('ul.why');
      await expect(why.textContent()).resolves.toContain('the policy says: wait (waiting)');
      const start = iso(H - 0.5 * HOUR_MS)
        .slice(0, 16)
        .replace('T', ' ');
      const end = iso(H).slice(0, 16).replace('T', ' ');
      await expect(why.locator('li[data-upstream="live.feed"]').textContent()).resolves.toBe(
        `live.feed misses 30m (50.00\u00a0% complete): ${start} → ${end} UTC.`,
      );
      // Deadline: six hours after the period's end, which was less than an hour ago.
      await expect(why.locator('li.deadline').textContent()).resolves.toMatch(
        new RegExp(
          `^Deadline ${iso(H + 6 * HOUR_MS)
            .slice(0, 16)
            .replace(
              'T',
              ' ',
            )} UTC \\(in (5h( \\d+m)?|4h \\d+m)\\): if still unsatisfied then, the period is missed\\.$`,
        ),
      );
      await expect(
        page.locator('table.upstreams tr[data-upstream="live.feed"] td.num').textContent(),
      ).resolves.toBe('50.00\u00a0%');
      await page.screenshot({ path: `${ARTIFACTS}/period-page.png`, fullPage: true });

      // A settling period says how long settle still runs; a triggered one shows its history.
      await page.goto(`${daemon.url}/rollups/payments_settled/periods/2025-06-01T00`);
      await expect(page.locator('ul.why li.settle').textContent()).resolves.toMatch(
        /^Settle \(1h without new data\) still runs (59m|1h)/,
      );
      await page.goto(`${daemon.url}/rollups/orders_hourly/periods/2025-06-02T15`);
      // The trigger history's rows (the run history's rows also carry an attempt).
      await expect(page.locator('tr[data-generation]:not([data-attempt])').count()).resolves.toBe(2);
      await expect(
        page.locator('tr[data-generation="2"]:not([data-attempt])').textContent(),
      ).resolves.toMatch(/replay.*delivered/);
      expect(errors).toEqual([]);
    });

    it('explains at 1,000 rollups why rollups wait, in natural order, numbers aligned with their headers', async () => {
      const started = Date.now();
      const response = await page.goto(`${large!.url}/`);
      const elapsed = Date.now() - started;
      expect(response?.status()).toBe(200);
      expect((await response!.body()).length).toBeLessThan(300_000);
      expect(elapsed).toBeLessThan(5_000); // the page goal is 300 ms on a quiet machine
      const rows = page.locator('table.overview tr[data-rollup]');
      await expect(rows.count()).resolves.toBe(50);
      // Equally bad rollups in natural order: r0, r1, r2, ... r10, not r0, r1, r10, r100.
      const ids = await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-rollup')));
      expect(ids.slice(0, 12)).toEqual([
        'r0',
        'r1',
        'r2',
        'r3',
        'r4',
        'r5',
        'r6',
        'r7',
        'r8',
        'r9',
        'r10',
        'r11',
      ]);
      // Why each waits: upstreams never seen, or how far behind now they end.
      await expect(page.locator('tr[data-rollup="r0"] td.why').textContent()).resolves.toBe(
        '2 upstreams never seen: never.0.x, never.0.y',
      );
      await expect(page.locator('tr[data-rollup="r1"] td.why').textContent()).resolves.toMatch(
        /^behind: big\.a3 3h( \d+m)?, big\.a2 2h( \d+m)?$/,
      );
      for (const id of ids) {
        await expect(
          page.locator(`tr[data-rollup="${id}"] td.why [data-why]`).count(),
          id!,
        ).resolves.toBeGreaterThan(0);
      }
      // Every column's contents line up with its header: right edges for numbers, left for text.
      // The page's first two overview tables (assets, rollups), each in a box of its own.
      for (const index of [0, 1]) {
        const table = `overview table ${index + 1}`;
        const columns = await page.evaluate((n) => {
          const d = (globalThis as unknown as InTable).document;
          const selector = `[data-overview-index="${n}"]`;
          let i = 0;
          for (const t of d.querySelectorAll('table.overview'))
            (t as unknown as { setAttribute(k: string, v: string): void }).setAttribute(
              'data-overview-index',
              String(i++),
            );
          const box = (node: { textContent: string }): Box => {
            const range = d.createRange();
            range.selectNodeContents(node);
            const { left, right } = range.getBoundingClientRect();
            return { left, right, text: node.textContent };
          };
          const heads = [...d.querySelectorAll(`${selector} thead th`)];
          return heads.map((th, j) => ({
            header: box(th),
            numeric: th.className.split(' ').includes('num'),
            cells: [...d.querySelectorAll(`${selector} tbody tr > td:nth-child(${j + 1})`)]
              .filter((td) => td.textContent.trim() !== '')
              .map(box),
          }));
        }, index);
        // Columns with something in them on this page (no failed run here, no freshness verdict).
        const filled = columns.filter((c) => c.cells.length > 0);
        expect(filled.filter((c) => c.numeric).length, table).toBeGreaterThanOrEqual(2);
        for (const { header, numeric, cells } of filled) {
          for (const cell of cells) {
            const [a, b] = numeric ? [cell.right, header.right] : [cell.left, header.left];
            expect(Math.abs(a - b), `${table} ${header.text}: ${cell.text}`).toBeLessThan(1.5);
          }
        }
      }
      await page.screenshot({ path: `${ARTIFACTS}/status-overview-1000.png`, fullPage: true });
      // The link to a never-seen upstream opens a page that says so.
      await page.locator('tr[data-rollup="r0"] td.why a', { hasText: 'never.0.x' }).click();
      await page.waitForURL('**/?asset=never.0.x');
      await expect(page.locator('[data-asset="never.0.x"] p.facts').textContent()).resolves.toBe(
        'never.0.x has never been seen: no event for it has been ingested yet. Rollup r0 waits for it.',
      );
      await page.screenshot({ path: `${ARTIFACTS}/status-never-seen.png`, fullPage: true });
      // A focused rollup shows its upstreams, not "0 of 0".
      await page.goto(`${large!.url}/?rollup=r5`);
      await expect(page.locator('section.card.asset[data-seen="false"]').count()).resolves.toBe(2);
      await expect(page.locator('h2', { hasText: 'Assets' }).textContent()).resolves.toContain('1–2 of 2');
      expect(errors).toEqual([]);
    });

    it('shows a hostile asset name as text', async () => {
      await page.goto(`${daemon.url}/?asset=${encodeURIComponent(HOSTILE)}`);
      await expect(page.locator('h3').textContent()).resolves.toBe(HOSTILE);
      expect(errors).toEqual([]);
    });
  },
);
