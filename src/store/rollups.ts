import { createHash } from 'node:crypto';
import type { Rollup, RollupSpec } from '../core/rollups/rollup.js';
import type { Logger } from '../support/log.js';
import { dropCursors } from './periods/cursors.js';
import { dirtyUntriggered, dropUntriggered } from './periods/writes.js';
import type { Sql } from './pg/db.js';

const hash = (value: unknown) =>
  createHash('sha256').update(JSON.stringify(value)).digest('hex').slice(0, 16);

type Spec = RollupSpec & { target: unknown };

function hashes(rollup: Rollup, spec: Spec) {
  // The effective grid, not the spelling: a default (such as origin = begin) that changes between
  // versions must rebuild periods as an edited calendar does, or old and new periods would overlap.
  const { every, timezone, origin } = rollup.calendar;
  const calendarHash = hash([every, timezone, origin, rollup.begin]);
  return { calendarHash, definitionHash: hash([spec, calendarHash]) };
}

/**
 * Records every rollup's definition: the new ones in one statement and the unchanged ones with a
 * single read, so a thousand rollups cost a lease holder's first pass milliseconds, not a
 * transaction each; changed ones go through `syncRollup`.
 */
export async function syncRollups(
  sql: Sql,
  rollups: ReadonlyArray<{ readonly rollup: Rollup; readonly spec: Spec }>,
  log: Logger,
): Promise<void> {
  const rows = await sql<{ id: string; definition_hash: string }[]>`
    select id, definition_hash from rollups where id = any(${rollups.map((r) => r.rollup.id)}::text[])`;
  const stored = new Map(rows.map((r) => [r.id, r.definition_hash]));
  const fresh = rollups.filter((r) => !stored.has(r.rollup.id));
  if (fresh.length > 0) {
    const h = fresh.map((r) => hashes(r.rollup, r.spec));
    await sql`
      insert into rollups (id, definition, calendar_hash, definition_hash)
      select id, definition::jsonb, calendar_hash, definition_hash from unnest(
        ${fresh.map((r) => r.rollup.id)}::text[], ${fresh.map((r) => JSON.stringify(r.spec))}::text[],
        ${h.map((x) => x.calendarHash)}::text[], ${h.map((x) => x.definitionHash)}::text[]
      ) as u(id, definition, calendar_hash, definition_hash)
      on conflict (id) do nothing`;
    log.info({ rollups: fresh.length }, 'rollups registered');
  }
  for (const r of rollups) {
    const known = stored.get(r.rollup.id);
    if (known !== undefined && known !== hashes(r.rollup, r.spec).definitionHash)
      await syncRollup(sql, r.rollup, r.spec, log);
  }
}

/**
 * Records the rollup's definition. A changed calendar drops the untriggered periods so they are
 * rebuilt on the new one from the merged index; any other change re-evaluates them. Triggered history
 * is kept.
 */
export async function syncRollup(sql: Sql, rollup: Rollup, spec: Spec, log: Logger) {
  const { calendarHash, definitionHash } = hashes(rollup, spec);
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
      // Stored periods are the touched ones: drop the untriggered ones and follow the upstreams'
      // logs again from the start, so the new calendar's touched periods get their rows.
      const dropped = await dropUntriggered(tx, rollup.id);
      await dropCursors(tx, rollup.id);
      log.warn({ rollup: rollup.id, dropped }, 'rollup calendar changed: untriggered periods rebuilt');
    } else {
      const marked = await dirtyUntriggered(tx, rollup.id);
      log.warn(
        { rollup: rollup.id, periods: marked },
        'rollup definition changed: untriggered periods re-evaluated',
      );
    }
    await tx`
      update rollups set definition = ${tx.json(spec as never)}, calendar_hash = ${calendarHash},
        definition_hash = ${definitionHash}, updated_at = now()
      where id = ${rollup.id}`;
  });
}
