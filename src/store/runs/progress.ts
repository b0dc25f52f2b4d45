/**
 * How far rollups got, as the chain demo (`coverage-rollup demo --chain`) prints it: how many of a
 * generation's runs succeeded, and which periods were decided at a generation, in the order they
 * were decided. Reads only.
 */
import type { Db } from '../pg/db.js';

/** How many runs of `rollupId`'s periods at `generation` succeeded. */
export async function succeededRuns(db: Db, rollupId: string, generation: number): Promise<number> {
  const [row] = await db<{ n: number }[]>`
    select count(*)::int as n from runs where rollup_id = ${rollupId} and generation = ${generation} and state = 'succeeded'`;
  return row!.n;
}

/** Every period of any rollup decided at `generation`, with its key, in the order of the decisions. */
export async function decidedAtGeneration(
  db: Db,
  generation: number,
): Promise<{ rollup_id: string; key: string; decided_at: Date }[]> {
  return db<{ rollup_id: string; key: string; decided_at: Date }[]>`
    select t.rollup_id, p.key, t.decided_at from triggers t join periods p on p.rollup_id = t.rollup_id and p.lo = t.period_lo
    where t.generation = ${generation} order by t.decided_at`;
}
