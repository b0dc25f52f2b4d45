/**
 * Open runs for `coverage_rollup_runs_open`, counted when /metrics is scraped, on any instance,
 * through boundedScrape like the period gauges: /metrics answers at once when PostgreSQL does not.
 */

import type { Db } from '../store/pg/db.js';
import { openRunCounts } from '../store/runs/open-runs.js';
import type { Logger } from '../support/log.js';
import { boundedScrape } from './bounded-scrape.js';
import {
  OPEN_RUN_STATES,
  type OpenRunSource,
  type OpenRunState,
  RUN_TARGET_TYPES,
  type RunTargetType,
} from './runs.js';

export function openRunGaugeSource(db: Db, log: Logger): OpenRunSource {
  return boundedScrape(
    async () =>
      (await openRunCounts(db)).flatMap((r) =>
        (RUN_TARGET_TYPES as readonly string[]).includes(r.target) &&
        (OPEN_RUN_STATES as readonly string[]).includes(r.state)
          ? [{ target: r.target as RunTargetType, state: r.state as OpenRunState, count: r.count }]
          : [],
      ),
    log,
    'open run gauges',
  );
}
