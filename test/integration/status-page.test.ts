/** The status page at `/` as HTML over HTTP: content, escaping, windows, caps and speed. */
import { describe, expect, it } from 'vitest';
import { escapeHtml, html } from '../../src/http/status/html.js';
import { toDrawItems } from '../../src/http/status/pixels.js';
import { startTestDaemon, TEST_TOKEN, testConfig, testProducer } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const HOSTILE = '<script>alert(1)</script>';
const MINUTE = 60_000_000;
const YEAR = 365 * 24 * 60 * MINUTE;
const BENCH_SEGMENTS = 10_000;

const db = await createTestDatabase();
const prefix = createTestPrefix();

// A year of minute-level coverage with 10,000 one-minute holes, written straight into the index
// (as ingesting ~525,000 events would leave it) before the daemon starts.
const nowMinute = Math.floor(Date.now() / 60_000) * MINUTE;
const benchStep = Math.floor(YEAR / BENCH_SEGMENTS / MINUTE) * MINUTE;
const benchLo = nowMinute - BENCH_SEGMENTS * benchStep;
const benchHi = nowMinute - MINUTE;
await db.sql`
  with a as (
    insert into assets (name, domain, zone, event_count, segment_count, covered_lo, covered_hi)
    values ('bench.minutely', 'time', 'UTC', ${YEAR / MINUTE}, ${BENCH_SEGMENTS}, ${benchLo}, ${benchHi})
    returning id)
  insert into segments (asset_id, span, version, state)
  select a.id, int8range(${benchLo}::int8 + i * ${benchStep}::int8, ${benchLo}::int8 + (i + 1) * ${benchStep}::int8 - ${MINUTE}::int8), 'v1', 'complete'
  from a, generate_series(0, ${BENCH_SEGMENTS - 1}) as i`;

const config = testConfig(db, prefix, {
  rollups: [
    {
      id: 'orders_hourly',
      upstream: ['warehouse.orders'],
      every: 'hour',
      begin: '2025-06-01T00:00:00Z',
      target: { type: 'queue', queue: 'status-runs' },
    },
    {
      id: 'bench_minutely',
      upstream: ['bench.minutely'],
      every: 'minute',
      begin: new Date(nowMinute / 1000 - 2 * 86_400_000).toISOString(),
      target: { type: 'queue', queue: 'bench-runs' },
    },
  ],
});
const daemon = await startTestDaemon(config);
const producer = testProducer(config);

const event = (asset: string, start: string, end: string, version = 'v1') => ({
  name: 'e',
  data: { asset, start, end, version },
});
const at = (hhmm: string) => `2025-06-01T${hhmm}:00Z`;

await producer.addBulk([
  event('warehouse.orders', at('08:00'), at('10:20')),
  event('warehouse.orders', at('10:40'), at('12:00')),
  event(HOSTILE, at('08:00'), at('09:00')),
  { name: 'e', data: { asset: 'kafka.offsets', start: 0, end: 100 } },
  { name: 'e', data: { asset: 'kafka.offsets', start: 150, end: 300 } },
  // 30 one-minute slices an hour apart: 29 gaps between them.
  ...Array.from({ length: 30 }, (_, i) => {
    const start = Date.UTC(2025, 5, 1) + i * 3_600_000;
    return event('many.gaps', new Date(start).toISOString(), new Date(start + 60_000).toISOString());
  }),
]);
await waitFor(
  async () => {
    const rows = await db.sql<{ n: number }[]>`select coalesce(sum(event_count), 0)::int as n from assets`;
    return rows[0]!.n >= 35 + YEAR / MINUTE;
  },
  { what: 'events indexed' },
);
await waitFor(
  async () => {
    const rows =
      await db.sql`select 1 from periods where rollup_id = 'orders_hourly' and state = 'triggered'`;
    return rows.length === 3;
  },
  { what: 'hours 08, 09 and 11 triggered' },
);

async function page(path: string, headers: Record<string, string> = {}) {
  const started = performance.now();
  const response = await daemon.http.inject({ url: path, headers });
  return { response, body: response.body, ms: performance.now() - started };
}

/** The attributes of every drawn rect with the given data-state inside one card. */
function rects(body: string, card: string, state: string): Array<Record<string, string>> {
  const start = body.indexOf(card);
  const section = body.slice(start, body.indexOf('</section>', start));
  return [...section.matchAll(/<rect class="s-[^"]*"([^>]*)>/g)]
    .map((m) => Object.fromEntries([...m[1]!.matchAll(/([\w-]+)="([^"]*)"/g)].map((a) => [a[1]!, a[2]!])))
    .filter((a) => a['data-state'] === state);
}

describe('status page', () => {
  it('draws each asset with its ratio, gap list and timeline, and each rollup with its periods', async () => {
    const { response, body } = await page('/');
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(response.headers['content-security-policy']).toContain("default-src 'none'");
    expect(body).toMatch(/^<!doctype html>/);
    expect(body).toContain('data-asset="warehouse.orders"');
    // Default window: the 7 days ending at the covered extent's end.
    expect(body).toContain('2025-05-25 12:00 → 2025-06-01 12:00 UTC (7d)');
    expect(body).toMatch(
      /<li data-state="gap" data-start="2025-06-01T10:20:00Z" data-end="2025-06-01T10:40:00Z">.*\(20m\)/,
    );
    const gaps = rects(body, 'data-asset="warehouse.orders"', 'gap');
    expect(gaps.map((g) => [g['data-start'], g['data-end']])).toContainEqual([
      '2025-06-01T10:20:00Z',
      '2025-06-01T10:40:00Z',
    ]);
    // The window before the first completion is drawn apart from gaps inside the extent.
    expect(rects(body, 'data-asset="warehouse.orders"', 'outside')).toHaveLength(1);
    const triggered = rects(body, 'data-rollup="orders_hourly"', 'triggered');
    expect(triggered.map((t) => [t['data-key'], t['data-generation']])).toEqual([
      ['2025-06-01T08', '1'],
      ['2025-06-01T09', '1'],
      ['2025-06-01T11', '1'],
    ]);
    expect(rects(body, 'data-rollup="orders_hourly"', 'waiting').map((t) => t['data-key'])).toContain(
      '2025-06-01T10',
    );
    expect(body).toMatch(/last trigger: <strong>covered<\/strong> at \d{4}-\d\d-\d\d \d\d:\d\d/);
  });

  it('escapes a hostile asset name everywhere and never emits a script element', async () => {
    for (const path of [
      '/',
      `/?asset=${encodeURIComponent(HOSTILE)}`,
      `/?asset=${encodeURIComponent(`${HOSTILE}x`)}`,
    ]) {
      const { response, body } = await page(path);
      expect([200, 404]).toContain(response.statusCode);
      expect(body).not.toContain(HOSTILE);
      expect(body.toLowerCase()).not.toContain('<script');
      expect(body).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    }
    const { body } = await page('/');
    expect(body).toContain(`href="/?${new URLSearchParams({ asset: HOSTILE })}"`);
  });

  it('answers an explicit window with the gap at its place in the drawing', async () => {
    const { response, body } = await page(
      '/?asset=warehouse.orders&start=2025-06-01T10:00:00Z&end=2025-06-01T11:00:00Z',
    );
    expect(response.statusCode).toBe(200);
    expect(body).not.toContain('data-asset="many.gaps"');
    const [gap] = rects(body, 'data-asset="warehouse.orders"', 'gap');
    expect(Number(gap!.x)).toBeCloseTo(1000 / 3, 1);
    expect(Number(gap!.width)).toBeCloseTo(1000 / 3, 1);
    // Zoom and pan links keep the focus and move the explicit window.
    expect(body).toContain(
      'href="/?asset=warehouse.orders&amp;start=2025-06-01T10%3A15%3A00Z&amp;end=2025-06-01T10%3A45%3A00Z"',
    );
    expect(body).toContain(
      'href="/?asset=warehouse.orders&amp;start=2025-06-01T09%3A30%3A00Z&amp;end=2025-06-01T10%3A30%3A00Z"',
    );
  });

  it('draws integer assets over their covered extent, or an explicit integer window', async () => {
    const whole = await page('/?asset=kafka.offsets');
    expect(whole.body).toContain('<li data-state="gap" data-start="100" data-end="150">');
    expect(whole.body).toContain('0 → 300 (300)');
    const [gap] = rects(whole.body, 'data-asset="kafka.offsets"', 'gap');
    expect([Number(gap!.x), Number(gap!.width)]).toEqual([333.33, 166.67]);
    // Time bounds do not apply to an integer asset; integer ones do.
    const timed = await page('/?start=2025-06-01T10:00:00Z&end=2025-06-01T11:00:00Z');
    expect(timed.body).toContain('0 → 300 (300)');
    const explicit = await page('/?asset=kafka.offsets&start=120&end=200');
    expect(explicit.body).toContain('120 → 200 (80)');
    expect(explicit.body).toContain('href="/?asset=kafka.offsets&amp;start=140&amp;end=180"');
  });

  it('lists at most 20 gaps and counts the rest', async () => {
    const { body } = await page('/?asset=many.gaps');
    expect(body).toContain('29 gaps in this window (newest first)');
    expect(body.match(/<li data-state="gap"/g)).toHaveLength(20);
    expect(body).toContain('and 9 more; zoom in to list them');
  });

  it('refuses bad windows with an HTML page that says why', async () => {
    for (const [query, text] of [
      ['window=2w', 'window must be one of 1y, 30d, 7d, 1d, 1h'],
      ['start=yesterday', 'start must be an ISO 8601 timestamp or an integer'],
      ['start=2025-06-02T00:00:00Z&end=2025-06-01T00:00:00Z', 'the window is empty'],
    ] as const) {
      const { response, body } = await page(`/?${query}`);
      expect(response.statusCode).toBe(400);
      expect(response.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(body).toContain(text);
    }
    const unknown = await page(`/?rollup=${encodeURIComponent('"><b>x')}`);
    expect(unknown.response.statusCode).toBe(404);
    expect(unknown.body).toContain('No rollup named &quot;&gt;&lt;b&gt;x is configured.');
  });

  it('needs a read token when read tokens are configured', async () => {
    const guarded = await startTestDaemon(
      testConfig(db, prefix, {
        read_tokens: ['read-token-0123456789abcdef'],
        scheduler: { enabled: false },
        queue: { name: 'status-guarded', prefix },
      }),
    );
    expect((await guarded.http.inject({ url: '/' })).statusCode).toBe(401);
    for (const token of ['read-token-0123456789abcdef', TEST_TOKEN]) {
      const ok = await guarded.http.inject({ url: '/', headers: { authorization: `Bearer ${token}` } });
      expect(ok.statusCode).toBe(200);
    }
  });

  it('stays bounded over a year of minute coverage with 10,000 segments', async () => {
    await waitFor(
      async () => {
        const rows = await db.sql<{ n: number }[]>`
          select count(*)::int as n from periods where rollup_id = 'bench_minutely' and state <> 'waiting'`;
        return rows[0]!.n > 2000;
      },
      { what: 'minute periods evaluated', timeout: 45_000 },
    );
    await page('/?asset=bench.minutely&window=1y'); // warm up
    const { response, body } = await page('/?asset=bench.minutely&window=1y');
    expect(response.statusCode).toBe(200);
    expect(body).toContain(`${(BENCH_SEGMENTS - 1).toLocaleString('en-US')} gaps in this window`);
    expect(body).toContain('and 9,979 more');
    const drawn = body.match(/<rect class="s-/g)!.length;
    // At most about two items per pixel column of each strip (1000 columns, two strips).
    expect(drawn).toBeLessThanOrEqual(4 * 1000);
    // Minute periods over the window outnumber the detail cap: drawn from per-pixel counts.
    expect(body).toMatch(/data-rollup="bench_minutely"[\s\S]*data-count="\d{2,}"/);
  });
});

describe('drawing helpers', () => {
  const severity = (state: string) => ['complete', 'gap'].indexOf(state);

  it('draws a year of minute pieces as at most a few items per pixel, keeping a lone gap visible', () => {
    const window = { start: 0, end: 365 * 24 * 60 * MINUTE };
    const pieces = function* () {
      for (let m = 0; m < 365 * 24 * 60; m++) {
        yield { start: m * MINUTE, end: (m + 1) * MINUTE, state: m === 200_000 ? 'gap' : 'complete' };
      }
    };
    const items = toDrawItems(pieces(), window, 1000, severity);
    expect(items.length).toBeLessThanOrEqual(3);
    const gap = items.find((i) => i.state === 'gap')!;
    expect(gap.major).toBe('complete');
    expect(gap.width).toBeGreaterThanOrEqual(1);
    expect(Math.abs(gap.x - (200_000 / (365 * 24 * 60)) * 1000)).toBeLessThan(1);
    // Painted last, so nothing covers it.
    expect(items[items.length - 1]).toBe(gap);
  });

  it('keeps pieces a pixel wide or more apart, each with its own details', () => {
    const window = { start: 0, end: 100 };
    const items = toDrawItems(
      [
        { start: 0, end: 10, state: 'complete', detail: 'a' },
        { start: 10, end: 20, state: 'complete', detail: 'b' },
        { start: 20, end: 20.01, state: 'gap', detail: 'c' },
      ],
      window,
      1000,
      severity,
    );
    expect(items.map((i) => [i.state, +i.x.toFixed(6), +i.width.toFixed(6), i.detail])).toEqual([
      ['complete', 0, 100, 'a'],
      ['complete', 100, 100, 'b'],
      ['gap', 199.55, 1, 'c'],
    ]);
  });

  it('escapes interpolated text, including quotes and control characters', () => {
    expect(escapeHtml('<a href="x" title=\'y\'>&\u0000</a>')).toBe(
      '&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;\ufffd&lt;/a&gt;',
    );
    const name = '<img src=x onerror=alert(1)>';
    expect(html`<p title="${name}">${[name, html`<b>${name}</b>`]}</p>`.value).toBe(
      '<p title="&lt;img src=x onerror=alert(1)&gt;">&lt;img src=x onerror=alert(1)&gt;<b>&lt;img src=x onerror=alert(1)&gt;</b></p>',
    );
  });
});
