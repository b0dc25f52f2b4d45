/**
 * The status page in a real browser (Debian's chromium through playwright-core): it renders, the
 * known gap sits at its place on the timeline, rollup strips show triggered periods, and a
 * screenshot lands in test-artifacts/status-page.png for a human to look at.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Daemon } from '../../src/daemon.js';
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
    rollups: [
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
      for (const id of ['orders_hourly', 'orders_daily', 'payments_settled']) {
        await expect(page.locator(`[data-rollup="${id}"] svg.track`).count()).resolves.toBe(1);
      }
      await page.screenshot({ path: `${ARTIFACTS}/status-page.png`, fullPage: true });
      expect(errors).toEqual([]);
    });

    it('draws the known gap where it lies in the window', async () => {
      await page.goto(`${daemon.url}/?window=1d`);
      const card = page.locator('[data-asset="warehouse.orders"]');
      const plot = (await card.locator('rect[data-role="plot"]').boundingBox())!;
      const gap = (await card
        .locator('rect[data-state="gap"][data-start="2025-06-02T10:20:00Z"][data-end="2025-06-02T10:40:00Z"]')
        .boundingBox())!;
      // The window is the day ending at the covered extent's end (2025-06-03T00:00Z).
      const minutes = 24 * 60;
      expect(Math.abs(gap.x - plot.x - ((10 * 60 + 20) / minutes) * plot.width)).toBeLessThan(2);
      expect(Math.abs(gap.width - (20 / minutes) * plot.width)).toBeLessThan(2);
      await expect(card.locator('li[data-state="gap"]').count()).resolves.toBe(1);
      await expect(card.locator('li[data-state="replay_required"]').count()).resolves.toBe(1);
      await page.screenshot({ path: `${ARTIFACTS}/status-page-1d.png`, fullPage: true });
    });

    it('shows triggered periods with their generation, and the other period states', async () => {
      await page.goto(`${daemon.url}/?rollup=orders_hourly&window=1d`);
      const strip = page.locator('[data-rollup="orders_hourly"]');
      const rerun = strip.locator('rect[data-state="triggered"][data-key="2025-06-02T15"]');
      await expect(rerun.getAttribute('data-generation')).resolves.toBe('2');
      await expect(
        strip.locator('rect[data-state="triggered"][data-generation="1"]').count(),
      ).resolves.toBeGreaterThan(10);
      await expect(strip.locator('rect[data-state="rerun_pending"]').count()).resolves.toBe(1);
      await expect(strip.locator('text.bar-text', { hasText: '#2' }).count()).resolves.toBe(1);
      await expect(strip.locator('.last').textContent()).resolves.toMatch(/last trigger: replay at .* #2/);
      await page.goto(`${daemon.url}/`);
      await expect(
        page.locator('[data-rollup="orders_daily"] rect[data-state="missed"]').count(),
      ).resolves.toBe(3);
      await expect(
        page.locator('[data-rollup="payments_settled"] rect[data-state="settling"]').count(),
      ).resolves.toBeGreaterThan(0);
    });

    it('shows a hostile asset name as text', async () => {
      await page.goto(`${daemon.url}/?asset=${encodeURIComponent(HOSTILE)}`);
      await expect(page.locator('h3').textContent()).resolves.toBe(HOSTILE);
      expect(errors).toEqual([]);
    });
  },
);
