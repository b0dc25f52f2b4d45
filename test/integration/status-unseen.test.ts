/**
 * The status page on upstreams no event has named yet: a page that says so, not a 404; on a
 * focused rollup, their cards come first and are paged and counted with the others.
 */
import { describe, expect, it } from 'vitest';
import { startTestDaemon, testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';

const db = await createTestDatabase();
const hourly = (id: string, upstream: string[]) => ({
  id,
  upstream,
  every: 'hour',
  begin: '2026-01-01',
  target: { type: 'queue', queue: 'unseen-runs' },
});
const names = (prefix: string, n: number) =>
  Array.from({ length: n }, (_, i) => `${prefix}.${String(i).padStart(2, '0')}`);
/** Never-seen names in between seen ones: the page must still list the never-seen first. */
const interleave = (a: string[], b: string[]) =>
  Array.from({ length: Math.max(a.length, b.length) }, (_, i) => [a[i], b[i]])
    .flat()
    .filter((n) => n !== undefined);
const mixed = { seen: names('mix.seen', 25), never: names('mix.never', 5) };
const mostly = { seen: names('most.seen', 2), never: names('most.never', 23) };
// Seen assets straight into the index: a row is all "seen" means; their cards sort by name.
await db.sql`
  insert into assets (name, domain, zone)
  select unnest(${[...mixed.seen, ...mostly.seen]}::text[]), 'time', 'UTC'`;
const daemon = await startTestDaemon(
  testConfig(db, createTestPrefix(), {
    scheduler: { enabled: false },
    rollups: [
      hourly('unseen_hourly', ['never.seen']),
      hourly('mixed', interleave(mixed.never, mixed.seen)),
      hourly('mostly_unseen', interleave(mostly.seen, mostly.never)),
    ],
  }),
);

interface ListedPage {
  readonly cards: string[];
  /** The Assets heading's range: `21–30 of 30`, or `0 of 30`. */
  readonly range: string;
  readonly pages: string | undefined;
}

/** Every page of a focused page's asset cards, following its "next" links. */
async function walk(url: string): Promise<ListedPage[]> {
  const pages: ListedPage[] = [];
  for (let next: string | undefined = url; next !== undefined; ) {
    expect(pages.length).toBeLessThan(10);
    const response = await daemon.http.inject({ url: next });
    expect(response.statusCode).toBe(200);
    const body: string = response.body;
    pages.push({
      cards: [...body.matchAll(/<section class="card asset" data-asset="([^"]+)"/g)].map((m) => m[1]!),
      range: /<h2>Assets <span class="more">([^·]+) ·/.exec(body)![1]!.trim(),
      pages: /<nav class="page-nav" aria-label="pages">page (\d+ of \d+)/.exec(body)?.[1],
    });
    next = /<a href="([^"]+)" rel="next">/.exec(body)?.[1]?.replaceAll('&amp;', '&');
  }
  return pages;
}

describe('status page focused on an asset', () => {
  it('says an upstream was never seen and which rollups wait for it (200)', async () => {
    const response = await daemon.http.inject({ url: '/?asset=never.seen' });
    expect(response.statusCode).toBe(200);
    expect(response.body).toContain('data-asset="never.seen" data-seen="false"');
    expect(response.body).not.toContain('No assets to show');
    expect(response.body.replace(/<[^>]+>/g, '')).toContain(
      'never.seen has never been seen: no event for it has been ingested yet. Rollup unseen_hourly waits for it.',
    );
  });

  it('answers 404 for an asset nothing knows nor waits for', async () => {
    const response = await daemon.http.inject({ url: '/?asset=nobody.knows' });
    expect(response.statusCode).toBe(404);
    expect(response.body).toContain('No asset named nobody.knows has been seen.');
  });
});

describe('status page focused on a rollup with never-seen upstreams', () => {
  it('pages never-seen and seen upstreams as one list: range, total and links agree with the cards', async () => {
    const pages = await walk('/?rollup=mixed');
    expect(pages.map((p) => [p.cards.length, p.range, p.pages])).toEqual([
      [20, '1–20 of 30', '1 of 2'],
      [10, '21–30 of 30', '2 of 2'],
    ]);
    expect(pages.flatMap((p) => p.cards)).toEqual([...mixed.never, ...mixed.seen]);
  });

  it('carries never-seen upstreams over to the next page when they fill the first', async () => {
    const pages = await walk('/?rollup=mostly_unseen');
    expect(pages.map((p) => [p.cards.length, p.range, p.pages])).toEqual([
      [20, '1–20 of 25', '1 of 2'],
      [5, '21–25 of 25', '2 of 2'],
    ]);
    expect(pages.flatMap((p) => p.cards)).toEqual([...mostly.never, ...mostly.seen]);
  });

  it('filters never-seen upstreams by name like the seen ones', async () => {
    const seen = await walk('/?rollup=mixed&q=SEEN.1');
    expect(seen.map((p) => [p.range, p.pages])).toEqual([['1–10 of 10', undefined]]);
    expect(seen[0]!.cards).toEqual(mixed.seen.filter((n) => n.startsWith('mix.seen.1')));
    const never = await walk('/?rollup=mixed&q=never.03');
    expect(never).toEqual([{ cards: ['mix.never.03'], range: '1–1 of 1', pages: undefined }]);
  });
});
