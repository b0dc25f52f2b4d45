import { describe, expect, it } from 'vitest';
import type { Domain } from '../../../src/core/types.js';
import { rememberDomains } from '../../../src/ingest/precheck.js';

/** The index's record, growing as assets are first committed, and every name it was asked for. */
function index() {
  const rows = new Map<string, Domain>();
  const asked: string[][] = [];
  const recorded = async (names: readonly string[]) => {
    asked.push([...names]);
    return new Map(names.flatMap((n) => (rows.has(n) ? [[n, rows.get(n)!] as const] : [])));
  };
  return { rows, asked, recorded };
}

describe('rememberDomains', () => {
  it('asks the index only for assets it has not seen recorded, and answers as the index would', async () => {
    const { rows, asked, recorded } = index();
    rows.set('a', 'time');
    const remembered = rememberDomains(recorded);
    expect(await remembered(['a', 'b'])).toEqual(new Map([['a', 'time']]));
    rows.set('b', 'integer'); // b's first commit
    expect(await remembered(['a', 'b'])).toEqual(
      new Map<string, Domain>([
        ['a', 'time'],
        ['b', 'integer'],
      ]),
    );
    expect(await remembered(['b', 'a'])).toEqual(
      new Map<string, Domain>([
        ['b', 'integer'],
        ['a', 'time'],
      ]),
    );
    expect(asked).toEqual([['a', 'b'], ['b']]);
  });

  it('starts over when full, still answering right', async () => {
    const { rows, asked, recorded } = index();
    for (const n of ['a', 'b', 'c']) rows.set(n, 'time');
    const remembered = rememberDomains(recorded, 2);
    await remembered(['a', 'b']);
    expect(await remembered(['c'])).toEqual(new Map([['c', 'time']]));
    expect(await remembered(['c'])).toEqual(new Map([['c', 'time']]));
    expect(asked).toEqual([['a', 'b'], ['c']]);
    expect(await remembered(['a'])).toEqual(new Map([['a', 'time']]));
    expect(asked.at(-1)).toEqual(['a']);
  });
});
