/**
 * When the lease holder's scheduler works on runs (scheduler.ts): the run step's pace behind a
 * backlog, and the wake-ups of finished queue jobs.
 */

import type { Sql } from '../store/pg/db.js';
import { checkSoon } from '../store/runs/next-checks.js';
import { type FollowContext, followRuns } from './follow-runs.js';

/** While a backlog keeps passes busy, runs are followed this often. */
const BUSY_FOLLOW_MS = 1000;

export class RunPacing {
  private followedAt = 0;
  /** The last run step left work (a full batch) for a later one. */
  private runsLeft = false;
  /** Finished jobs whose runs are to be checked at once, and whether an update is in flight. */
  private readonly finished = new Set<string>();
  private finishing = false;

  constructor(
    private readonly sql: Sql,
    /** Told when finished runs were made due: a pass should ask about them. */
    private readonly onDue: () => void,
  ) {}

  /**
   * Runs: timeouts, due retries and outcomes, each bounded (a retry is delivered on the next pass).
   * Behind a backlog of decisions, once a second: decisions first, yet outcomes still flow. The
   * scheduler also calls it between the rounds of a long pass (a cascade's backlog): outcomes are
   * what the next level of a chain waits for, and a pass over thousands of decisions once starved
   * them for its whole length.
   */
  async follow(
    ctx: FollowContext,
    signal: AbortSignal,
    behind: boolean,
  ): Promise<{ work: boolean; more: boolean }> {
    if (signal.aborted) return { work: false, more: false };
    if (behind && Date.now() - this.followedAt < BUSY_FOLLOW_MS) return { work: false, more: this.runsLeft };
    this.followedAt = Date.now();
    const result = await followRuns(ctx, signal);
    this.runsLeft = result.more;
    return result;
  }

  /**
   * A queue job finished: ask about its run now rather than at its next check. Ids that arrive
   * while one update is in flight go together in the next: a burst of finished jobs costs a few
   * statements, not one commit each.
   */
  finishedJob(runId: string): void {
    this.finished.add(runId);
    if (this.finishing) return;
    this.finishing = true;
    const flush = (): void => {
      const ids = [...this.finished];
      this.finished.clear();
      checkSoon(this.sql, ids)
        .then(
          () => this.onDue(),
          () => {}, // the runs' regular checks still come
        )
        .finally(() => {
          if (this.finished.size > 0) flush();
          else this.finishing = false;
        });
    };
    flush();
  }
}
