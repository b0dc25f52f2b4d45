import type { FreshnessFacts } from '../core/freshness.js';
import type { Domain } from '../core/types.js';
import { coveredUntil, lastEventAt } from './coverage-query.js';
import type { Db } from './db.js';

interface FreshnessRow {
  name: string;
  domain: Domain;
  covered_until: number | null;
  last_event_at: Date | null;
}

/**
 * Every asset's freshness facts in one statement: per asset, one probe of the segments' GiST
 * index and one of the event log's primary key, so it stays cheap at thousands of assets.
 */
export async function freshnessFacts(sql: Db): Promise<Map<string, FreshnessFacts>> {
  const rows = await sql<FreshnessRow[]>`
    select a.name, a.domain, ${coveredUntil(sql)} as covered_until, ${lastEventAt(sql)} as last_event_at
    from assets a`;
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
