/** An asset's whole-history facts for the status page's headline, read from real segments. */
import { describe, expect, it } from 'vitest';
import { assetHistories, HISTORY_MAX_SEGMENTS } from '../../src/store/assets/asset-history.js';
import { createTestDatabase } from '../helpers/db.js';

const db = await createTestDatabase();

/** Inserts an asset and its segments ([lo, hi, version, state]); returns its id. */
async function asset(name: string, segments: Array<[number, number, string, string]>): Promise<number> {
  const lo = segments.length === 0 ? null : Math.min(...segments.map((s) => s[0]));
  const hi = segments.length === 0 ? null : Math.max(...segments.map((s) => s[1]));
  const [row] = await db.sql<{ id: number }[]>`
    insert into assets (name, domain, zone, covered_lo, covered_hi, segment_count)
    values (${name}, 'time', 'UTC', ${lo}, ${hi}, ${segments.length}) returning id`;
  for (const [start, end, version, state] of segments) {
    await db.sql`
      insert into segments (asset_id, span, version, state, required_version)
      values (${row!.id}, int8range(${start}, ${end}), ${version}, ${state},
        ${state === 'replay_required' ? 'v3' : null})`;
  }
  return row!.id;
}

describe('asset histories', () => {
  it('counts the holes between segments and the ranges to replay, whatever their versions', async () => {
    // [0,10) v1 and [10,20) v2 touch: no hole. Holes: [20,25) and [30,40). [25,30) is owed a rebuild.
    const mixed = await asset('h.mixed', [
      [0, 10, 'v1', 'complete'],
      [10, 20, 'v2', 'complete'],
      [25, 30, 'v1', 'replay_required'],
      [40, 50, 'v1', 'complete'],
    ]);
    const whole = await asset('h.whole', [[100, 200, 'v1', 'complete']]);
    // The newest data is owed a rebuild: covered_until stops before it.
    const owed = await asset('h.owed', [
      [0, 10, 'v1', 'complete'],
      [10, 20, 'v1', 'replay_required'],
    ]);
    const empty = await asset('h.empty', []);
    const histories = await assetHistories(db.sql, [mixed, whole, owed, empty]);
    expect(histories.get(mixed)).toMatchObject({ gaps: 2, replayRequired: 1, coveredUntil: 50 });
    expect(histories.get(whole)).toMatchObject({ gaps: 0, replayRequired: 0, coveredUntil: 200 });
    expect(histories.get(owed)).toMatchObject({ gaps: 0, replayRequired: 1, coveredUntil: 10 });
    expect(histories.get(empty)).toEqual({
      domain: 'time',
      coveredUntil: null,
      lastEventAt: null,
      gaps: 0,
      replayRequired: 0,
    });
    await expect(assetHistories(db.sql, [])).resolves.toEqual(new Map());
  });

  it('leaves the holes of an asset with more segments than it sorts per page uncounted', async () => {
    const big = await asset('h.big', [
      [0, 10, 'v1', 'complete'],
      [20, 30, 'v1', 'complete'],
    ]);
    await db.sql`update assets set segment_count = ${HISTORY_MAX_SEGMENTS + 1} where id = ${big}`;
    const history = (await assetHistories(db.sql, [big])).get(big);
    expect(history).toMatchObject({ gaps: null, replayRequired: null, coveredUntil: 30 });
  });
});
