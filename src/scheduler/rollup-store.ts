import { createHash } from 'node:crypto';
import type { Rollup, RollupSpec } from '../core/rollup.js';
import type { Db, Sql } from '../index/db.js';
import type { Logger } from '../log.js';

const hash = (value: unknown) =>
  createHash('sha256').update(JSON.stringify(value)).digest('hex').slice(0, 16);

/**
 * Records the rollup's definition. A changed calendar drops the untriggered periods so they are
 * rebuilt on the new one; any other change re-evaluates them. Triggered history is kept.
 */
export async function syncRollup(
  sql: Sql,
  rollup: Rollup,
  spec: RollupSpec & { target: unknown },
  log: Logger,
) {
  // The effective grid, not the spelling: a default (such as origin = begin) that changes between
  // versions must rebuild periods as an edited calendar does, or old and new periods would overlap.
  const { every, timezone, origin } = rollup.calendar;
  const calendarHash = hash([every, timezone, origin, rollup.begin]);
  const definitionHash = hash([spec, calendarHash]);
  await sql.begin(async (tx) => {
    const [row] = await tx<{ calendar_hash: string; definition_hash: string }[]>`
      select calendar_hash, definition_hash from rollups where id = ${rollup.id} for update`;
    if (!row) {
      await tx`
        insert into rollups (id, definition, calendar_hash, definition_hash)
        values (${rollup.id}, ${tx.json(spec as never)}, ${calendarHash}, ${definitionHash})`;
      log.info({ rollup: rollup.id }, 'rollup registered');
      return;
    }
    if (row.definition_hash === definitionHash) return;
    if (row.calendar_hash !== calendarHash) {
      const dropped = await tx`delete from periods where rollup_id = ${rollup.id} and generation = 0`;
      await tx`update rollups set materialized_until = null where id = ${rollup.id}`;
      log.warn(
        { rollup: rollup.id, dropped: dropped.count },
        'rollup calendar changed: untriggered periods rebuilt',
      );
    } else {
      const marked =
        await tx`update periods set dirty = true where rollup_id = ${rollup.id} and generation = 0`;
      log.warn(
        { rollup: rollup.id, periods: marked.count },
        'rollup definition changed: untriggered periods re-evaluated',
      );
    }
    await tx`
      update rollups set definition = ${tx.json(spec as never)}, calendar_hash = ${calendarHash},
        definition_hash = ${definitionHash}, updated_at = now()
      where id = ${rollup.id}`;
  });
}

/**
 * Creates the periods from `begin` up to `until` (exclusive of periods starting after it), at
 * most `max` per call so a rollup that begins years back never stalls. Returns how many it made.
 */
export async function materializePeriods(
  sql: Db,
  rollup: Rollup,
  until: number,
  max: number,
): Promise<number> {
  const [row] = await sql<{ materialized_until: number | null }[]>`
    select materialized_until from rollups where id = ${rollup.id}`;
  const from = row?.materialized_until ?? rollup.begin;
  if (from >= until) return 0;
  const periods = rollup.calendar.periodsOverlapping({ start: from, end: until }, max);
  if (periods.length === 0) return 0;
  await sql`
    insert into periods (rollup_id, lo, hi, key)
    select ${rollup.id}, * from unnest(
      ${periods.map((p) => p.start)}::int8[], ${periods.map((p) => p.end)}::int8[], ${periods.map((p) => p.key)}::text[]
    )
    on conflict do nothing`;
  await sql`update rollups set materialized_until = ${periods.at(-1)!.end} where id = ${rollup.id}`;
  return periods.length;
}
