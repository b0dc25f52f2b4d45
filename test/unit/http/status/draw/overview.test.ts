/**
 * The status page's overview tables: every numeric column is aligned like its header, and each
 * rollup row says why it waits.
 */
import { describe, expect, it } from 'vitest';
import { PERIOD_STATES } from '../../../../../src/core/periods/policy.js';
import { defineRollup } from '../../../../../src/core/rollups/rollup.js';
import { renderOverviewRollups } from '../../../../../src/http/status/draw/overview.js';
import { renderWhyWaiting, whyWaiting } from '../../../../../src/http/status/draw/why-waiting.js';

/** Per column: whether its header and each of its cells are classed `num` (right-aligned). */
function alignment(table: string): { headers: boolean[]; rows: boolean[][] } {
  const cells = (row: string, tag: string) =>
    [...row.matchAll(new RegExp(`<${tag}(?: class="([^"]*)")?>`, 'g'))].map((m) =>
      (m[1] ?? '').split(' ').includes('num'),
    );
  const [head = '', body = ''] = table.split('</thead>');
  return {
    headers: cells(head, 'th'),
    rows: body
      .split('</tr>')
      .slice(0, -1)
      .map((r) => cells(r, 'td')),
  };
}

const why = { unseen: [], nothingComplete: [], behind: [] };
const HOUR_US = 3_600_000_000;
const NOW = Date.parse('2026-06-01T10:30:00Z') * 1000;
const rollup = (upstream: string[], every: string | number = 'hour') =>
  defineRollup(
    {
      id: 'r',
      upstream,
      every,
      timezone: 'UTC',
      begin: typeof every === 'number' ? 0 : '2026-01-01',
      policy: { settle: 0, on_deadline: 'trigger' },
      rerun: 'never',
    },
    { type: 'queue', followed: true },
  );

describe('overview tables', () => {
  it('right-aligns the header of every numeric column, as its cells', () => {
    const counts = Object.fromEntries(PERIOD_STATES.map((s, i) => [s, i * 1000])) as Record<
      (typeof PERIOD_STATES)[number],
      number
    >;
    const html = String(
      renderOverviewRollups([
        { id: 'r2', source: 'api', every: 'hour', upstreams: 2, failedRuns: 3, counts, domain: 'time', why },
      ]),
    );
    const { headers, rows } = alignment(html);
    expect(headers).toEqual([false, false, false, true, true, ...PERIOD_STATES.map(() => true), false]);
    for (const row of rows) expect(row).toEqual(headers);
  });
});

describe('why a rollup waits', () => {
  const text = (html: unknown) => String(html).replace(/<[^>]+>/g, '');

  it('names upstreams never seen, with nothing complete, and behind the current period by how much', () => {
    const ends = new Map([
      ['a0', { coveredHi: NOW - 2 * HOUR_US }],
      ['a1', { coveredHi: NOW - 0.25 * HOUR_US }], // inside the current hour: not behind
      ['a2', { coveredHi: null }],
      ['a3', { coveredHi: NOW - 26 * HOUR_US }],
    ]);
    const r = rollup(['a0', 'a1', 'a2', 'a3', 'u0', 'u1', 'u2']);
    const w = whyWaiting(r, ends, NOW);
    expect(w).toEqual({
      unseen: ['u0', 'u1', 'u2'],
      nothingComplete: ['a2'],
      behind: [
        { name: 'a3', by: 26 * HOUR_US },
        { name: 'a0', by: 2 * HOUR_US },
      ],
    });
    expect(text(renderWhyWaiting(w, 'time'))).toBe(
      '3 upstreams never seen: u0, u1 +1 more · nothing complete: a2 · behind: a3 1d 2h, a0 2h',
    );
    expect(String(renderWhyWaiting(w, 'time'))).toContain('<a href="/?asset=u0">u0</a>');
  });

  it('says the upstreams are current when none is behind, and measures integer lag in positions', () => {
    const current = whyWaiting(rollup(['a0']), new Map([['a0', { coveredHi: NOW }]]), NOW);
    expect(text(renderWhyWaiting(current, 'time'))).toBe('upstreams current');
    const ints = whyWaiting(
      rollup(['i0', 'i1'], 100),
      new Map([
        ['i0', { coveredHi: 5_000 }],
        ['i1', { coveredHi: 3_800 }],
      ]),
      NOW,
    );
    expect(text(renderWhyWaiting(ints, 'integer'))).toBe('behind: i1 1,200');
  });
});
