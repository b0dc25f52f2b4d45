/**
 * The daemon's table maintenance loop: at start it says whether autovacuum looks after
 * its database, and then, where it does not, it analyzes and vacuums its own tables after large
 * changes (src/store/upkeep/maintenance.ts), and on the PostgreSQL queue backend those of the queue schemas
 * it consumes, under the maintenance lock retention uses, so one instance works at a time. The
 * counts it reads are cheap, so it looks often: every MAINTENANCE_EVERY_MS (or every
 * retention.prune_every, if shorter), and a table churned by ingest and marking (periods, assets,
 * cursors, BullMQ's jobs) is vacuumed before its dead rows fill more than a few pages.
 */

import type { Sql } from '../store/pg/db.js';
import {
  type AutovacuumState,
  autovacuumState,
  maintainTables,
  type TableWork,
} from '../store/upkeep/maintenance.js';
import { withMaintenanceLock } from '../store/upkeep/retention.js';
import type { Logger } from '../support/log.js';
import { Periodic } from '../support/periodic.js';

export const MAINTENANCE_EVERY_MS = 10_000;

/** How soon a pass that found the maintenance lock held tries again. */
const LOCK_RETRY_MS = 250;

export class MaintenanceLoop {
  private readonly loop: Periodic;
  private autovacuum: AutovacuumState | undefined;
  private lastAt: Date | undefined;
  private lastError: string | undefined;
  private analyzed = 0;
  private vacuumed = 0;

  constructor(
    private readonly sql: Sql,
    private readonly everyMs: number,
    private readonly log: Logger,
    /** The schemas of the queues this instance consumes on the PostgreSQL backend (consumedQueueSchemas); none on Redis. */
    private readonly queueSchemas: readonly string[],
  ) {
    // A pass that found the lock held (a retention pass, here or elsewhere) tries again soon, not
    // a whole interval later.
    this.loop = new Periodic(async () => {
      const work = await this.pass();
      const locked = work === undefined && this.lastError === undefined;
      return locked ? Math.min(LOCK_RETRY_MS, this.everyMs) : this.everyMs;
    }, everyMs);
  }

  /** Reads and logs the autovacuum state, then starts the passes. A failure is logged, not thrown. */
  async start(): Promise<void> {
    try {
      this.autovacuum = await autovacuumState(this.sql, this.queueSchemas);
      const { database, tablesOff } = this.autovacuum;
      if (!database || tablesOff.length > 0) {
        const which = this.queueSchemas.length > 0 ? 'its own tables and queue schemas' : 'its own tables';
        this.log.warn(
          {
            autovacuum: database ? 'on' : 'off',
            tables_without_autovacuum: tablesOff,
            queue_schemas: this.queueSchemas,
          },
          database
            ? "autovacuum is off for some of this database's tables: the daemon analyzes and vacuums them after large changes"
            : `autovacuum is off for this database: the daemon analyzes and vacuums ${which} after large changes (other tables in it are left as they are)`,
        );
      }
    } catch (error) {
      this.lastError = (error as Error).message;
      this.log.warn({ err: error }, 'could not read the autovacuum setting');
    }
    // The first pass at once, not awaited: a database just restored or bulk-loaded has never been
    // analyzed, and its first plans should not wait a whole period for statistics.
    this.loop.start(0);
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** For /readyz: informative only, never a reason to be unready. */
  status(): Record<string, unknown> {
    const av = this.autovacuum;
    return {
      autovacuum: av === undefined ? 'unknown' : av.database ? 'on' : 'off',
      tables_without_autovacuum: av?.tablesOff ?? [],
      daemon_maintains: av === undefined ? null : !av.database || av.tablesOff.length > 0,
      queue_schemas: this.queueSchemas,
      last_pass_at: this.lastAt?.toISOString() ?? null,
      tables_analyzed: this.analyzed,
      tables_vacuumed: this.vacuumed,
      ...(this.lastError ? { error: this.lastError } : {}),
    };
  }

  /** One pass now (tests, and each timer tick). Returns the work done, or undefined if another instance held the lock. */
  async pass(): Promise<TableWork[] | undefined> {
    try {
      // Read again each pass for /readyz: BullMQ creates a queue schema on first use, and an
      // operator may turn autovacuum off for a table while the daemon runs (the passes follow it).
      this.autovacuum = await autovacuumState(this.sql, this.queueSchemas);
      const work = await withMaintenanceLock(this.sql, () => maintainTables(this.sql, this.queueSchemas));
      this.lastError = undefined;
      if (work === undefined) return undefined;
      this.lastAt = new Date();
      for (const w of work ?? []) {
        this.analyzed += 1;
        if (w.vacuum) this.vacuumed += 1;
        this.log.debug(w, w.vacuum ? 'table vacuumed and analyzed' : 'table analyzed');
      }
      return work;
    } catch (error) {
      this.lastError = (error as Error).message;
      this.log.warn({ err: error }, 'table maintenance pass failed; retrying at the next one');
      return undefined;
    }
  }
}
