/**
 * The read behind every commit: which segments a batch touches. Its plan must probe the GiST index
 * of the exclusion constraint, never compare the batch with all of an asset's segments (issue 21),
 * and its answer must be exactly the segments that overlap or touch the batch's ranges.
 */
import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Interval, Segment } from '../../src/core/types.js';
import { lockAssets } from '../../src/store/assets/assets.js';
import {
  insertSegments,
  segmentsTouchingMany,
  segmentsTouchingStatement,
  type TouchRequest,
} from '../../src/store/assets/segments-sql.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

let db: TestDatabase;
const ids = new Map<string, number>();

async function assetId(name: string): Promise<number> {
  const known = ids.get(name);
  if (known !== undefined) return known;
  const locked = await db.sql.begin((tx) => lockAssets(tx, [{ name, domain: 'integer', zone: 'UTC' }]));
  const id = locked.get(name)!.id;
  ids.set(name, id);
  return id;
}

beforeAll(async () => {
  db = await createTestDatabase();
});

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

function* nodes(plan: PlanNode): Generator<PlanNode> {
  yield plan;
  for (const child of plan.Plans ?? []) yield* nodes(child);
}

async function planOf(requests: readonly TouchRequest[]): Promise<PlanNode[]> {
  const statement = segmentsTouchingStatement(db.sql, requests)!;
  const [row] = await db.sql<
    { 'QUERY PLAN': Array<{ Plan: PlanNode }> }[]
  >`explain (format json) ${statement}`;
  return [...nodes(row!['QUERY PLAN'][0]!.Plan)];
}

describe('the plan of segmentsTouchingMany', () => {
  const SEGMENTS = 20_000;
  // Segments [2i, 2i + 1): unit slices every other unit, as from a source full of holes.
  // hole(i) fills the hole after segment i, touching it and the next one.
  const hole = (i: number): Interval => ({ start: 2 * i + 1, end: 2 * i + 2 });

  it('probes the GiST index per asset, with no hash join, on an asset with many segments', async () => {
    const holes = await assetId('many.holes');
    const other = await assetId('many.other');
    await db.sql`
      insert into segments (asset_id, span, version, state)
      select ${holes}, int8range(2 * i, 2 * i + 1), 'v1', 'complete' from generate_series(0::int8, ${SEGMENTS - 1}::int8) i`;
    await db.sql`
      insert into segments (asset_id, span, version, state)
      select ${other}, int8range(2 * i, 2 * i + 1), 'v1', 'complete' from generate_series(0::int8, 999::int8) i`;
    // A batch of 250 slices: new ones past the end (every other unit, from the last segment's
    // end on), and ones filling holes all over the history.
    const requests: TouchRequest[] = [
      { assetId: holes, ranges: Array.from({ length: 150 }, (_, k) => hole(SEGMENTS - 1 + 2 * k)) },
      { assetId: holes, ranges: Array.from({ length: 50 }, (_, k) => hole(397 * k)) },
      { assetId: other, ranges: Array.from({ length: 50 }, (_, k) => hole(999 + 2 * k)) },
    ];
    // Fresh statistics (before autovacuum has analysed the table) and settled ones: both plans.
    for (const analysed of [false, true]) {
      if (analysed) await db.sql`analyze segments`;
      const plan = await planOf(requests);
      const described = plan.map((n) => `${n['Node Type']} ${n['Relation Name'] ?? n['Index Name'] ?? ''}`);
      expect(described, `analysed: ${analysed}`).not.toContainEqual(
        expect.stringMatching(/Hash Join|Merge Join/),
      );
      expect(described, `analysed: ${analysed}`).not.toContain('Seq Scan segments');
      expect(
        plan.some((n) => n['Index Name'] === 'segments_disjoint'),
        `analysed: ${analysed}`,
      ).toBe(true);
    }
    const found = await segmentsTouchingMany(db.sql, requests);
    // 50 filled holes touch their two neighbours each; the new slices touch only the last segment.
    expect(found.get(holes)).toHaveLength(100 + 1);
    expect(found.get(other)).toHaveLength(1);
  });
});

describe('the answer of segmentsTouchingMany', () => {
  const SPAN = 200;
  const interval = fc
    .tuple(fc.integer({ min: -5, max: SPAN + 5 }), fc.integer({ min: 1, max: 30 }))
    .map(([start, length]): Interval => ({ start, end: start + length }));
  const stored = new Map<number, Array<Segment & { id: number }>>();

  beforeAll(async () => {
    // Three assets with disjoint segments of random lengths and holes (fixed seed).
    const [layouts] = fc.sample(
      fc.array(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 6 }), fc.integer({ min: 1, max: 9 })), { maxLength: 40 }),
        {
          minLength: 3,
          maxLength: 3,
        },
      ),
      { numRuns: 1, seed: 21 },
    );
    const rows: Array<{ assetId: number; segment: Segment }> = [];
    for (const [n, layout] of layouts!.entries()) {
      const id = await assetId(`answer.${n}`);
      let at = 0;
      for (const [hole, length] of layout) {
        at += hole;
        rows.push({
          assetId: id,
          segment: { start: at, end: at + length, version: 'v1', state: 'complete', requiredVersion: null },
        });
        at += length;
      }
    }
    await insertSegments(db.sql, rows);
    for (const id of new Set(rows.map((r) => r.assetId))) {
      stored.set(
        id,
        await db.sql<Array<Segment & { id: number }>>`
          select id, lower(span) as start, upper(span) as "end", version, state, required_version as "requiredVersion"
          from segments where asset_id = ${id}`,
      );
    }
  });

  it('is every segment that overlaps or touches a requested range, once', async () => {
    const assets = fc.constantFrom('answer.0', 'answer.1', 'answer.2');
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ asset: assets, ranges: fc.array(interval, { maxLength: 6 }) }), {
          maxLength: 4,
        }),
        async (batch) => {
          const requests = await Promise.all(
            batch.map(async (b) => ({ assetId: await assetId(b.asset), ranges: b.ranges })),
          );
          const expected = new Map<number, number[]>();
          for (const { assetId: id, ranges } of requests) {
            const touched = (stored.get(id) ?? [])
              .filter((s) => ranges.some((r) => s.start <= r.end && r.start <= s.end))
              .map((s) => s.id);
            expected.set(
              id,
              [...new Set([...(expected.get(id) ?? []), ...touched])].sort((a, b) => a - b),
            );
          }
          const found = await segmentsTouchingMany(db.sql, requests);
          for (const [id, want] of expected) {
            const got = (found.get(id) ?? []).map((s) => s.id).sort((a, b) => a - b);
            expect(got).toEqual(want);
            for (const s of found.get(id) ?? []) {
              const row = stored.get(id)!.find((x) => x.id === s.id)!;
              expect({ ...s }).toEqual({ ...row });
            }
          }
          for (const id of found.keys()) expect(expected.has(id)).toBe(true);
        },
      ),
      { numRuns: 60 },
    );
  });
});
