/** The status page's overview tables: every numeric column is aligned like its header. */
import { describe, expect, it } from 'vitest';
import { PERIOD_STATES } from '../../src/core/policy.js';
import { renderOverviewRollups } from '../../src/http/status/overview.js';

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

describe('overview tables', () => {
  it('right-aligns the header of every numeric column, as its cells', () => {
    const counts = Object.fromEntries(PERIOD_STATES.map((s, i) => [s, i * 1000])) as Record<
      (typeof PERIOD_STATES)[number],
      number
    >;
    const html = String(
      renderOverviewRollups([{ id: 'r2', every: 'hour', upstreams: 2, failedRuns: 3, counts }]),
    );
    const { headers, rows } = alignment(html);
    expect(headers).toEqual([false, false, true, true, ...PERIOD_STATES.map(() => true)]);
    for (const row of rows) expect(row).toEqual(headers);
  });
});
