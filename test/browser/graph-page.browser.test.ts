/**
 * The graph page (`/graph`) in a real browser (Debian's chromium through playwright-core): a chain
 * of five nodes (asset → rollup → output asset → rollup → output asset, five layers) fits the page
 * of a 1,500 px window, with no sideways scrolling and every node inside the visible box. A
 * screenshot lands in test-artifacts/ for a human to look at.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { chromium } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { startTestDaemon, testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';

const CHROMIUM = '/usr/bin/chromium';
const available = existsSync(CHROMIUM);
if (!available) {
  console.warn(`graph page browser test skipped: ${CHROMIUM} is missing (apt-get install -y chromium)`);
}
const ARTIFACTS = 'test-artifacts';

/** The page's globals, as the callback that runs in it sees them (the tests compile without DOM types). */
type Box = { left: number; right: number; top: number; bottom: number };
type InPage = {
  document: {
    querySelector(selector: string): {
      scrollWidth: number;
      clientWidth: number;
      getBoundingClientRect(): Box;
    } | null;
    querySelectorAll(selector: string): ArrayLike<{ getBoundingClientRect(): Box }>;
  };
};

describe.skipIf(!available)('the graph page in a browser', () => {
  it('lays a 5-node chain out within a 1,500 px window: no sideways scroll, every node visible', async () => {
    const db = await createTestDatabase();
    const rollup = (id: string, upstream: string, every: string, output: string) => ({
      id,
      upstream: [upstream],
      every,
      begin: '2026-11-02',
      output,
      target: { type: 'queue', queue: 'graph-browser-runs' },
    });
    const daemon = await startTestDaemon(
      testConfig(db, createTestPrefix(), {
        assets: [{ name: 'warehouse.raw_orders', freshness: { max_lag: 'PT1H' } }],
        rollups: [
          rollup('orders_hourly', 'warehouse.raw_orders', 'hour', 'agg.orders_hourly'),
          rollup('orders_daily', 'agg.orders_hourly', 'day', 'agg.orders_daily'),
        ],
      }),
    );
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
    const page = await browser.newPage({ viewport: { width: 1500, height: 900 } });
    const response = await page.goto(`${daemon.url}/graph`);
    expect(response?.status()).toBe(200);

    const measured = await page.evaluate(() => {
      const { document } = globalThis as unknown as InPage;
      const box = document.querySelector('.graph')!;
      const visible = box.getBoundingClientRect();
      const nodes = Array.from(document.querySelectorAll('svg.graph-svg rect.node'), (n) => {
        const r = n.getBoundingClientRect();
        return { left: r.left, right: r.right, top: r.top, bottom: r.bottom };
      });
      return {
        scrollWidth: box.scrollWidth,
        clientWidth: box.clientWidth,
        box: { left: visible.left, right: visible.right, top: visible.top, bottom: visible.bottom },
        nodes,
      };
    });
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: `${ARTIFACTS}/graph-chain-1500.png`, fullPage: true });

    expect(measured.nodes).toHaveLength(5);
    expect(measured.scrollWidth).toBeLessThanOrEqual(measured.clientWidth);
    for (const node of measured.nodes) {
      expect(node.left).toBeGreaterThanOrEqual(measured.box.left);
      expect(node.right).toBeLessThanOrEqual(measured.box.right);
      expect(node.top).toBeGreaterThanOrEqual(measured.box.top);
      expect(node.bottom).toBeLessThanOrEqual(measured.box.bottom);
    }
    // Laid out left to right in five layers, each node right of the one before.
    const lefts = measured.nodes.map((n) => n.left).sort((a, b) => a - b);
    for (let i = 1; i < lefts.length; i++) expect(lefts[i]!).toBeGreaterThan(lefts[i - 1]!);
  });
});
