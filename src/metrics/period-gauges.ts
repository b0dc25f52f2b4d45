import type { RollupRuntime } from '../config/rollups.js';
import { periodsPastDeadline } from '../store/periods/late.js';
import { rollupCounts } from '../store/periods/reads.js';
import type { Db } from '../store/pg/db.js';
import type { Logger } from '../support/log.js';
import { boundedScrape } from './bounded-scrape.js';
import { labelsOf } from './lean-registry.js';
import type { PeriodGaugeSource } from './registry.js';

/**
 * Periods per rollup and state, stored and derived, for `coverage_rollup_periods`, and those past
 * their deadline still undecided, for `coverage_rollup_periods_past_deadline`: computed when
 * scraped, from a few rows per rollup, on any instance (not only the lease holder), in one read
 * through boundedScrape: cut off from PostgreSQL, /metrics still answers at once with the last
 * counts. Every rollup with a deadline is exported, at 0 when nothing is late.
 */
export function periodGaugeSource(
  db: Db,
  /** The rollups now (the catalog changes while the daemon runs). */
  rollups: () => readonly RollupRuntime[],
  log: Logger,
): PeriodGaugeSource {
  const read = boundedScrape(
    async () => {
      const now = Date.now();
      const defs = rollups().map((r) => r.rollup);
      const [counts, late] = await Promise.all([
        rollupCounts(db, defs, now),
        periodsPastDeadline(db, defs, now),
      ]);
      return { counts, late };
    },
    log,
    'period gauges',
  );
  // The last answer, kept when a read fails or comes late; 0 for each until a first one.
  let late = new Map(
    rollups()
      .map((r) => r.rollup)
      .filter((r) => r.policy.deadlineMs !== undefined)
      .map((r) => [r.id, 0]),
  );
  // The same label objects at every scrape: their text is formatted once (lean-registry.ts).
  const byState = labelsOf<{ rollup: string; state: string }>();
  const byRollup = labelsOf<{ rollup: string }>();
  return {
    async periods(gauge) {
      const answer = await read();
      if (answer === null) return;
      const values = [];
      for (const [rollup, counts] of answer.counts)
        for (const [state, n] of Object.entries(counts))
          values.push({ value: n, labels: byState({ rollup, state }) });
      gauge.replace(values);
    },
    async pastDeadline(gauge) {
      late = (await read())?.late ?? late;
      for (const [rollup, n] of late) gauge.set(byRollup({ rollup }), n);
    },
  };
}
