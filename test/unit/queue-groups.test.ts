import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loadConfig, parseConfig } from '../../src/config/index.js';
import { fnv1a32, groupOf } from '../../src/core/routing.js';
import { consumedGroups, hasHashTag, queueGroups } from '../../src/queue/groups.js';

/** The routing table of docs/scaling.md: producers in other languages check their code against it. */
const VECTORS: Array<[name: string, fnv: number, groups2: number, groups3: number, groups4: number]> = [
  ['', 0x811c9dc5, 1, 1, 1],
  ['a', 0xe40c292c, 0, 1, 0],
  ['foobar', 0xbf9cf968, 0, 1, 0],
  ['warehouse.orders', 0x77850e7f, 1, 0, 3],
  ['warehouse.customers', 0xbaae99af, 1, 1, 3],
  ['s3://lake/events/2025', 0x2ca02078, 0, 2, 0],
  ['café.ventes', 0xb7311c36, 0, 2, 2],
  ['注文', 0x596729ab, 1, 2, 3],
];

describe('routing an asset to its queue group', () => {
  it.each(VECTORS)('%j hashes as docs/scaling.md says', (name, fnv, g2, g3, g4) => {
    expect(fnv1a32(name)).toBe(fnv);
    expect([groupOf(name, 1), groupOf(name, 2), groupOf(name, 3), groupOf(name, 4)]).toEqual([0, g2, g3, g4]);
  });

  it('matches a byte-wise FNV-1a over UTF-8 for any name', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), fc.integer({ min: 1, max: 64 }), (name, groups) => {
        let h = 0x811c9dc5n;
        for (const byte of Buffer.from(name, 'utf8')) h = ((h ^ BigInt(byte)) * 0x01000193n) & 0xffffffffn;
        expect(groupOf(name, groups)).toBe(Number(h % BigInt(groups)));
      }),
    );
  });

  it('refuses a group count that is not a positive integer', () => {
    expect(() => groupOf('a', 0)).toThrow(RangeError);
    expect(() => groupOf('a', 1.5)).toThrow(RangeError);
  });
});

describe('queue groups in the config', () => {
  it('keeps one group under the configured prefix by default', () => {
    const { queue } = loadConfig({ env: {} });
    expect(queue.groups).toBe(1);
    expect(queueGroups(queue)).toEqual([
      { index: 0, prefix: 'bull', name: 'asset-events', deadLetter: 'asset-events-dead' },
    ]);
  });

  it('gives each of N groups its own hash tag, and consumes all unless told', () => {
    const { queue } = parseConfig({ queue: { prefix: 'cr', groups: 3 } });
    expect(queueGroups(queue).map((g) => g.prefix)).toEqual(['{cr-0}', '{cr-1}', '{cr-2}']);
    expect(consumedGroups(queue).map((g) => g.index)).toEqual([0, 1, 2]);
    const some = parseConfig({ queue: { prefix: 'cr', groups: 3, consume: [2, 0] } }).queue;
    expect(consumedGroups(some).map((g) => g.prefix)).toEqual(['{cr-2}', '{cr-0}']);
  });

  it('refuses consume lists naming missing or repeated groups, and braces in a grouped prefix', () => {
    expect(() => parseConfig({ queue: { groups: 2, consume: [2] } })).toThrow(
      'queue.consume[0]: group 2 does not exist: groups are 0 to 1',
    );
    expect(() => parseConfig({ queue: { groups: 2, consume: [1, 1] } })).toThrow('group 1 listed twice');
    // An empty list is an instance that ingests nothing (it serves HTTP or schedules).
    expect(consumedGroups(parseConfig({ queue: { groups: 2, consume: [] } }).queue)).toEqual([]);
    expect(() => parseConfig({ queue: { groups: 2, prefix: '{cr}' } })).toThrow(
      'queue.prefix: with queue.groups > 1 the prefix must not contain braces',
    );
  });

  it('reads several comma-separated seeds as a Redis Cluster and asks for hash tags there', () => {
    const seeds = 'redis://a:6379,redis://b:6379';
    expect(() => parseConfig({ redis_url: seeds })).toThrow(
      'queue.prefix: on Redis Cluster the prefix needs a hash tag, e.g. "{bull}"',
    );
    expect(parseConfig({ redis_url: seeds, queue: { prefix: '{cr}' } }).redis_url).toBe(seeds);
    expect(parseConfig({ redis_url: seeds, queue: { groups: 3 } }).queue.groups).toBe(3);
    const rollup = { id: 'r', upstream: 'a', every: 'hour', begin: '2025-01-01T00:00:00Z' };
    expect(() =>
      parseConfig({
        redis_url: seeds,
        queue: { groups: 3 },
        rollups: [{ ...rollup, target: { type: 'queue', queue: 'runs' } }],
      }),
    ).toThrow("rollups[r].target.prefix: on Redis Cluster a queue target's prefix needs a hash tag");
    expect(
      parseConfig({
        redis_url: seeds,
        queue: { groups: 3 },
        rollups: [{ ...rollup, target: { type: 'queue', queue: 'runs', prefix: '{runs}' } }],
      }).rollups[0]?.target,
    ).toMatchObject({ prefix: '{runs}' });
    expect(() => loadConfig({ env: { REDIS_URL: 'redis://a:1,http://b:2' } })).toThrow(
      'redis_url (from REDIS_URL): expected a redis:// or rediss:// URL, or several comma-separated ones',
    );
  });

  it('recognises a hash tag as Redis Cluster does', () => {
    expect(hasHashTag('{cr}')).toBe(true);
    expect(hasHashTag('x{cr}y')).toBe(true);
    expect(hasHashTag('{}cr')).toBe(false);
    expect(hasHashTag('cr')).toBe(false);
    expect(hasHashTag('{cr')).toBe(false);
  });
});
