/**
 * A rollup's definition across restarts (syncRollup): unchanged, it keeps its periods; a changed
 * calendar, spelled differently or the same spelling on a different effective grid, drops the
 * untriggered periods and the log cursors so they are rebuilt, and keeps the triggered history.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { defineRollups } from '../../src/config/rollups.js';
import { syncRollup, syncRollups } from '../../src/store/rollups.js';
import { createTestDatabase } from '../helpers/db.js';
import { log } from './ingest-harness.js';

const db = await createTestDatabase();

function runtime(fields: Record<string, unknown>) {
  const config = parseConfig({
    rollups: [{ id: 'sync', upstream: ['s.a'], target: { type: 'queue', queue: 'q' }, ...fields }],
  });
  return defineRollups(config)[0]!;
}

async function sync(r: ReturnType<typeof runtime>) {
  await syncRollup(db.sql, r.rollup, { ...r.config, target: r.config.target }, log);
}

const periods = () =>
  db.sql<{ lo: number; generation: number }[]>`
    select lo, generation from periods where rollup_id = 'sync' order by lo`;

describe('syncRollup', () => {
  it('keeps periods for an unchanged definition and rebuilds untriggered ones on a new grid', async () => {
    const first = runtime({ every: 10, begin: 0 });
    await sync(first);
    // Touched periods and the cursor that marked them.
    await db.sql`
      insert into periods (rollup_id, lo, hi, key)
      select 'sync', lo, lo + 10, lo::text from generate_series(0, 40, 10) as lo`;
    await db.sql`insert into rollup_cursors (rollup_id, asset_name, seq) values ('sync', 's.a', 7)`;
    await db.sql`update periods set generation = 1, state = 'triggered' where rollup_id = 'sync' and lo = 0`;
    await sync(first);
    expect((await periods()).map((p) => p.lo)).toEqual([0, 10, 20, 30, 40]);

    // The same spelling, another effective grid: what a changed default does to a stored rollup.
    const moved = { ...first, rollup: runtime({ every: 10, begin: 0, origin: 5 }).rollup };
    await sync(moved);
    expect(await periods()).toEqual([{ lo: 0, generation: 1 }]);
    expect(await db.sql`select seq from rollup_cursors where rollup_id = 'sync'`).toEqual([]);
    const counts = await db.sql`select state, n from period_counts where rollup_id = 'sync' and n > 0`;
    expect(counts).toEqual([{ state: 'triggered', n: 1 }]);
  });

  it('registers many rollups in one statement and leaves unchanged ones alone', async () => {
    const many = Array.from(
      { length: 50 },
      (_, i) =>
        defineRollups(
          parseConfig({
            rollups: [
              {
                id: `many${i}`,
                upstream: ['m.a'],
                every: 'hour',
                begin: '2025-01-01',
                target: { type: 'queue', queue: 'q' },
              },
            ],
          }),
        ).map((r) => ({ rollup: r.rollup, spec: r.config }))[0]!,
    );
    await syncRollups(db.sql, many, log);
    const rows = await db.sql<{ id: string; definition: { every: string } }[]>`
      select id, definition from rollups where id like 'many%' order by id`;
    expect(rows).toHaveLength(50);
    expect(rows[0]!.definition.every).toBe('hour');
    const before = await db.sql`select id, updated_at from rollups where id like 'many%' order by id`;
    await syncRollups(db.sql, many, log);
    expect(await db.sql`select id, updated_at from rollups where id like 'many%' order by id`).toEqual(
      before,
    );
  });
});
