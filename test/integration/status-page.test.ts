/**
 * The status page at `/` and the period page as HTML over HTTP: content, escaping, windows
 * anchored at now, headlines, caps and speed.
 */
import { describe, expect, it } from 'vitest';
import { escapeHtml, html } from '../../src/http/status/draw/html.js';
import { toDrawItems } from '../../src/http/status/draw/pixels.js';
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
  assets: [{ name: 'warehouse.orders', freshness: { max_lag: 'PT20M' } }],
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
  // Generous: ~525,000 minutes of coverage and two rollups, on a machine other suites share.
  { what: 'events indexed', timeout: 120_000 },
);
await waitFor(
  async () => {
    const rows =
      await db.sql`select 1 from periods where rollup_id = 'orders_hourly' and state = 'triggered'`;
    return rows.length === 3;
  },
  { what: 'hours 08, 09 and 11 triggered', timeout: 120_000 },
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
  it('ends every time window at now, and heads each card with facts no window changes', async () => {
    const before = Date.now();
    const { response, body } = await page('/');
    expect(response.statusCode).toBe(200);
    expect(body).toContain('<meta http-equiv="refresh" content="60">');
    // One axis for every time card: the day ending at now (to the whole second).
    const ends = new Set([...body.matchAll(/data-window-end="([^"]+)"/g)].map((m) => m[1]!));
    ends.delete('300'); // kafka.offsets: an integer asset keeps its own extent
    expect(ends.size).toBe(1);
    const end = Date.parse([...ends][0]!);
    expect(end).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000);
    expect(end).toBeLessThanOrEqual(Date.now() + 1000);
    // The stale asset leads, whatever else lags longer; its whole window is behind now.
    const first = body.indexOf('<section class="card asset"');
    expect(body.slice(first, first + 200)).toContain('data-asset="warehouse.orders" data-stale="true"');
    const card = body.slice(first, body.indexOf('</section>', first));
    expect(card).toContain('<span class="badge bad">stale</span>');
    expect(card).toMatch(
      /<span class="lag bad" data-lag-seconds="\d+(\.\d+)?">\d+d( \d+h)? behind now<\/span>/,
    );
    expect(card).toContain('stale: covered until 2025-06-01T12:00:00Z,');
    // Holes since the first event, not in the window: the one between 10:20 and 10:40.
    expect(card).toContain('<span class="holes bad">1 gap since the first event</span>');
    expect(card).toContain('0\u00a0% of this window complete');
    expect(rects(body, 'data-asset="warehouse.orders"', 'behind')).toHaveLength(1);
    // many.gaps has no max_lag: not judged, shown with its lag and holes.
    expect(body).toMatch(/data-asset="many.gaps" data-stale="unknown"[\s\S]*?29 gaps since the first event/);
    // orders_hourly: every hour since begin but the three triggered ones is late, save the current one.
    const head = body.match(
      /data-rollup="orders_hourly">[\s\S]*?<span class="headline"><span class="warn" data-count="late">([\d,]+) periods waiting past their end<\/span> · current period <a href="[^"]+">(\S+)<\/a> waiting \(0\u00a0%\)/,
    );
    const hours = (Date.parse(`${head![2]}:00:00Z`) - Date.parse('2025-06-01T00:00:00Z')) / 3_600_000;
    expect(Number(head![1]!.replace(/,/g, ''))).toBe(hours - 3);
  });

  it('draws each asset with its ratio, gap list and timeline, and each rollup with its periods', async () => {
    const { response, body } = await page('/?window=7d&end=2025-06-01T12:00:00Z');
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(response.headers['content-security-policy']).toContain("default-src 'none'");
    expect(body).toMatch(/^<!doctype html>/);
    expect(body).toContain('data-asset="warehouse.orders"');
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
    // Hours 00 to 07 wait untouched: one drawn piece whose tooltip counts periods, not their length.
    expect(body).toMatch(/<title>8 periods [^<]*: 8 waiting<\/title>/);
    expect(body).toMatch(/last trigger: <strong>covered<\/strong> at \d{4}-\d\d-\d\d \d\d:\d\d/);
    // Each single period links to its why; the partial hour 10 is shaded by its ratio.
    expect(body).toContain(
      '<a href="/rollups/orders_hourly/periods/2025-06-01T08"><rect class="s-triggered"',
    );
    const [hour10] = rects(body, 'data-rollup="orders_hourly"', 'waiting').filter(
      (r) => r['data-key'] === '2025-06-01T10',
    );
    expect(hour10!['data-ratio']).toBe(String(2 / 3));
    expect(body).toMatch(
      /<rect class="fill" x="[\d.]+" y="12\.67" width="[\d.]+" height="17\.33" data-ratio="0\.6666/,
    );
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
    // Zoom and pan links keep the focus and move the explicit window; zooming keeps its end.
    expect(body).toContain(
      'href="/?asset=warehouse.orders&amp;start=2025-06-01T10%3A30%3A00Z&amp;end=2025-06-01T11%3A00%3A00Z"',
    );
    expect(body).toContain(
      'href="/?asset=warehouse.orders&amp;start=2025-06-01T09%3A00%3A00Z&amp;end=2025-06-01T11%3A00%3A00Z"',
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
    expect(explicit.body).toContain('href="/?asset=kafka.offsets&amp;start=160&amp;end=200"');
  });

  it('lists at most 20 gaps and counts the rest', async () => {
    const { body } = await page('/?asset=many.gaps&window=7d&end=2025-06-03T00:00:00Z');
    expect(body).toContain('29 gaps in this window (newest first)');
    expect(body.match(/<li data-state="gap"/g)).toHaveLength(20);
    expect(body).toContain('and 9 more; zoom in to list them');
  });

  it('follows now when zooming a window that ends at now, and comes back to now from the past', async () => {
    const { body } = await page('/?asset=warehouse.orders&window=1d');
    expect(body).toContain(
      '<a href="/?asset=warehouse.orders&amp;window=1h" title="a narrower window, still ending at now">+ zoom in</a>',
    );
    expect(body).toContain(
      '<a href="/?asset=warehouse.orders&amp;window=7d" title="a wider window, still ending at now">− zoom out</a>',
    );
    expect(body).toContain('<span class="off" title="the window ends at now">later ▶</span>');
    const past = await page('/?asset=warehouse.orders&window=1d&end=2025-06-01T12:00:00Z');
    expect(past.body).toContain(
      '<a href="/?asset=warehouse.orders&amp;window=1d" title="follow now">→ now</a>',
    );
  });

  it('explains a period on its own page, from the same facts as the JSON detail', async () => {
    const { response, body } = await page('/rollups/orders_hourly/periods/2025-06-01T10');
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-security-policy']).toContain("default-src 'none'");
    expect(body).toContain('data-state="waiting"');
    expect(body).toContain(
      'warehouse.orders</a> misses 20m (66.66\u00a0% complete): 2025-06-01 10:20 → 2025-06-01 10:40 UTC.',
    );
    expect(body).toContain('No deadline: it waits until the policy is met.');
    expect(body).toContain('Never triggered.');
    const json = await daemon.http.inject({ url: '/v1/rollups/orders_hourly/periods/2025-06-01T10' });
    expect(json.json().upstreams['warehouse.orders']).toMatchObject({ ratio: 2 / 3, missing_total: 1200 });

    const triggered = await page('/rollups/orders_hourly/periods/2025-06-01T08');
    expect(triggered.body).toMatch(/<tr data-generation="1"><td class="num">#1<\/td><td>covered<\/td>/);
    // A decided period owes nothing: never "the policy says: wait (triggered)".
    expect(triggered.body).not.toContain('wait (triggered)');
    expect(triggered.body).toMatch(
      /the period is <strong>triggered \(generation 1\)<\/strong> and nothing more is owed/,
    );
    expect(triggered.body).toContain('rel="prev">previous period 2025-06-01T07</a>');
    expect(triggered.body).toContain('rel="next">next period 2025-06-01T09</a>');

    for (const [path, text] of [
      [
        '/rollups/orders_hourly/periods/2024-01-01T00',
        'Rollup orders_hourly has no period 2024-01-01T00: it begins with 2025-06-01T00.',
      ],
      [
        '/rollups/orders_hourly/periods/nonsense',
        'Rollup orders_hourly has no period nonsense: its keys look like 2025-06-01T00.',
      ],
      [
        '/rollups/orders_hourly/periods/2099-01-01T00',
        'Rollup orders_hourly has no period 2099-01-01T00 (yet).',
      ],
      [
        `/rollups/${encodeURIComponent(HOSTILE)}/periods/x`,
        'No rollup named &lt;script&gt;alert(1)&lt;/script&gt; is configured.',
      ],
    ] as const) {
      const missing = await page(path);
      expect(missing.response.statusCode, path).toBe(404);
      expect(missing.body).toContain(text);
      expect(missing.body).not.toContain('<script');
    }
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
    // As many segments as the headline counts holes over, at most.
    expect(body).toContain('<span class="holes bad">9,999 gaps since the first event</span>');
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
