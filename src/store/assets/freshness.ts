import type { FreshnessFacts } from '../../core/intervals/freshness.js';
import type { Domain } from '../../core/types.js';
import type { Sql, Tx } from '../pg/db.js';
import { coveredUntil, lastEventAt } from './coverage-query.js';

interface FreshnessRow {
  name: string;
  domain: Domain;
  covered_until: number | null;
  last_event_at: Date | null;
}

/**
 * Every asset's freshness facts in one statement (or only the named ones'): per asset, one probe
 * of the segments' GiST index and one of the event log's primary key (about 0.25 s for 10,000
 * assets on a loaded 2-core machine).
 */
export async function freshnessFacts(
  sql: Sql,
  names?: readonly string[],
): Promise<Map<string, FreshnessFacts>> {
  const only = names === undefined ? null : [...names];
  return factsWhere(sql, (tx) => tx`${only}::text[] is null or a.name = any(${only}::text[])`);
}

/**
 * The facts the freshness gauges can report anything for: assets that ever had a completion
 * (covered_hi is set with the first; without one there is no lag) and those with a max_lag
 * (`stale`). At platform scale most declared assets have neither: 240 rows instead of 10,000 per
 * scrape, read and dropped every scrape (issue 38).
 */
export function freshnessGaugeFacts(
  sql: Sql,
  withMaxLag: readonly string[],
): Promise<Map<string, FreshnessFacts>> {
  const named = [...withMaxLag];
  return factsWhere(sql, (tx) => tx`a.covered_hi is not null or a.name = any(${named}::text[])`);
}

async function factsWhere(sql: Sql, where: (tx: Tx) => ReturnType<Tx>): Promise<Map<string, FreshnessFacts>> {
  const rows = await sql.begin(async (tx) => {
    // Thousands of probes add up to a plan cost that turns JIT on, and compiling the plan took
    // longer (650 ms at 10,000 assets) than running it.
    await tx`set local jit = off`;
    return tx<FreshnessRow[]>`
      select a.name, a.domain, ${coveredUntil(tx)} as covered_until, ${lastEventAt(tx)} as last_event_at
      from assets a where ${where(tx)}`;
  });
  return new Map(
    rows.map((r) => [
      r.name,
      {
        domain: r.domain,
        coveredUntil: r.covered_until,
        lastEventAt: r.last_event_at === null ? null : r.last_event_at.getTime(),
      },
    ]),
  );
}
