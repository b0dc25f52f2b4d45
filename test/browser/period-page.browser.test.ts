/**
 * The status and period pages fit the window: at 1,500 and 700 px wide, no horizontal scrollbar,
 * though a period has a run history of several attempts with long errors and run ids. A run that
 * did not fail is not tinted as an error; counts are in words that agree with the number
 * ("1 event · 1 segment"). Screenshots of each page at each width land in test-artifacts/ for a
 * person to look at.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import type { Daemon } from '../../src/daemon/daemon.js';
import { startTestDaemon, TEST_TOKEN, testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';

const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM);
const ARTIFACTS = 'test-artifacts';
const WIDTHS = [1500, 700] as const;

const DAY_MS = 86_400_000;
const day = new Date(Date.now() - DAY_MS).toISOString().slice(0, 10);
const compact = day.replaceAll('-', '');
const ROLLUP = 'clicks_hourly_by_region_and_campaign';
const span = (h: number) => ({
  start: `${day}T${String(h).padStart(2, '0')}:00:00Z`,
  end: `${day}T${String(h + 1).padStart(2, '0')}:00:00Z`,
});
const keyOf = (h: number) => `${ROLLUP}@${compact}T${String(h).padStart(2, '0')}0000Z#1`;
const LONG_ERROR =
  'HTTP 500 from https://scheduler.internal.example.com/api/v2/jobs/clicks_hourly_by_region_and_campaign/runs: ' +
  'upstream warehouse connection reset while reading partition region=eu-west-1/campaign=spring_sale_2025_retargeting ' +
  '(attempted 3 times over 45s); see the job log for the stack trace';

async function setUp(): Promise<{ daemon: Daemon; browser: Browser; page: Page }> {
  const sink = await startWebhookSink();
  afterAll(() => sink.close());
  const db = await createTestDatabase();
  const config = testConfig(db, createTestPrefix(), {
    scheduler: { run_check_every: 'PT0.1S' },
    rollups: [
      {
        id: ROLLUP,
        upstream: ['web.clicks'],
        every: 'hour',
        begin: day,
        run: { retries: 3, backoff: 'PT0.1S', timeout: 'PT60S', outcome: 'callback' },
        target: { type: 'webhook', url: sink.url },
      },
      {
        id: 'views_hourly_by_region_and_campaign',
        upstream: ['web.views'],
        every: 'hour',
        begin: day,
        run: { retries: 0, timeout: 'PT60S', outcome: 'callback' },
        target: { type: 'webhook', url: sink.url },
      },
    ],
  });
  const daemon = await startTestDaemon(config);
  const write = (url: string, payload: object) =>
    daemon.http.inject({ method: 'POST', url, headers: { authorization: `Bearer ${TEST_TOKEN}` }, payload });
  await write('/v1/events', [
    { asset: 'web.clicks', ...span(4), version: 'v1', id: 'c4' },
    { asset: 'web.clicks', ...span(5), version: 'v1', id: 'c5' },
    { asset: 'web.views', ...span(5), version: 'v1', id: 'v5' },
  ]);
  // Hour 4: attempts 1 and 2 fail with a long error, attempt 3 succeeds. Hour 5 succeeds at once.
  const delivered = (key: string) =>
    waitFor(() => sink.calls.find((c) => c.key === key), { what: `${key} delivered`, timeout: 30_000 });
  for (const attempt of [1, 2, 3]) {
    const key = keyOf(4);
    await delivered(attempt === 1 ? key : `${key}~a${attempt}`);
    const state = attempt < 3 ? 'failed' : 'succeeded';
    const reported = await write('/v1/runs', {
      idempotency_key: key,
      attempt,
      state,
      ...(state === 'failed' ? { error: `${LONG_ERROR} (attempt ${attempt})` } : { version: 'v1' }),
    });
    expect(reported.statusCode).toBe(200);
  }
  await delivered(keyOf(5));
  await write('/v1/runs', { idempotency_key: keyOf(5), attempt: 1, state: 'succeeded' });
  // A run that failed for good: the status page lists it first, with its error.
  const views = `views_hourly_by_region_and_campaign@${compact}T050000Z#1`;
  await delivered(views);
  await write('/v1/runs', { idempotency_key: views, attempt: 1, state: 'failed', error: LONG_ERROR });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
    ],
  });
  afterAll(() => browser.close());
  const page = await browser.newPage({ viewport: { width: WIDTHS[0], height: 900 } });
  return { daemon, browser, page };
}

const env = available ? await setUp() : undefined;

/** The page's globals, as the callbacks that run in it see them (the tests compile without DOM types). */
type InPage = {
  document: { documentElement: { scrollWidth: number } };
  innerWidth: number;
  getComputedStyle(element: unknown): { backgroundColor: string };
};

describe.skipIf(!available)('the pages fit the window', () => {
  const { daemon, page } = env ?? ({} as NonNullable<typeof env>);
  mkdirSync(ARTIFACTS, { recursive: true });
  const overflow = () =>
    page.evaluate(() => {
      const w = globalThis as unknown as InPage;
      return w.document.documentElement.scrollWidth - w.innerWidth;
    });

  it.each(WIDTHS)(
    'at %i px: the period page with a long run history, no horizontal scrollbar',
    async (width) => {
      await page.setViewportSize({ width, height: 900 });
      const response = await page.goto(`${daemon.url}/rollups/${ROLLUP}/periods/${day}T04`);
      expect(response?.status()).toBe(200);
      await expect(page.locator('table.run-history tr[data-attempt]').count()).resolves.toBe(3);
      await page.screenshot({ path: `${ARTIFACTS}/period-page-runs-${width}.png`, fullPage: true });
      expect(await overflow()).toBeLessThanOrEqual(0);
      // The run id is on screen, whole or wrapped, not pushed past the right edge.
      const id = (await page.locator('tr[data-attempt="3"] td.id').boundingBox())!;
      expect(id.x + id.width).toBeLessThanOrEqual(width);
    },
  );

  it.each(WIDTHS)('at %i px: the status page, no horizontal scrollbar', async (width) => {
    await page.setViewportSize({ width, height: 900 });
    await page.goto(`${daemon.url}/`);
    await expect(page.locator('table.failed-runs tr[data-run-state="failed"]').count()).resolves.toBe(1);
    await page.screenshot({ path: `${ARTIFACTS}/status-page-${width}.png`, fullPage: true });
    expect(await overflow()).toBeLessThanOrEqual(0);
  });

  it('tints only a run that failed as an error', async () => {
    await page.setViewportSize({ width: WIDTHS[0], height: 900 });
    await page.goto(`${daemon.url}/rollups/${ROLLUP}/periods/${day}T05`);
    const cell = page.locator('table.run-history tr[data-attempt="1"] td.error');
    const background = (td: unknown) =>
      (globalThis as unknown as InPage).getComputedStyle(td).backgroundColor;
    await expect(cell.evaluate(background)).resolves.toBe('rgba(0, 0, 0, 0)');
    await page.goto(`${daemon.url}/rollups/${ROLLUP}/periods/${day}T04`);
    const failed = page.locator('table.run-history tr[data-attempt="1"] td.error');
    await expect(failed.textContent()).resolves.toContain('HTTP 500');
  });

  it('counts in words that agree with the number', async () => {
    for (const [asset, counts] of [
      ['web.clicks', '2 events · 1 segment · '],
      ['web.views', '1 event · 1 segment · '],
    ]) {
      await page.goto(`${daemon.url}/?asset=${asset}`);
      await expect(page.locator(`[data-asset="${asset}"] p.facts`).first().textContent()).resolves.toContain(
        counts,
      );
    }
  });
});
