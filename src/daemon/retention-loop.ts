import type { Config } from '../config/index.js';
import type { Metrics } from '../metrics/registry.js';
import type { Sql } from '../store/pg/db.js';
import { type PruneReport, prune, type RetentionOptions } from '../store/upkeep/retention.js';
import type { Logger } from '../support/log.js';
import { Periodic } from '../support/periodic.js';

/** Retention settings from the config: what `prune` needs, for the daemon and the CLI alike. */
export function retentionOptions(config: Config, dryRun = false): RetentionOptions {
  const { events, history, partition, prune_every } = config.retention;
  return {
    eventsMs: events,
    historyMs: history,
    partitionSeconds: partition / 1000,
    // Two passes' worth, so one failed pass never leaves ingest without a partition.
    aheadSeconds: Math.max(2 * partition, 2 * prune_every) / 1000,
    readers: config.rollups.flatMap((r) => r.upstream.map((asset) => ({ rollup: r.id, asset }))),
    dryRun,
  };
}

/**
 * The daemon's background retention: a pass at start (before ingest, so its partition exists) and
 * every retention.prune_every. Every instance runs it; the pass's advisory lock lets one work.
 */
export class RetentionLoop {
  private readonly loop: Periodic;
  private last: PruneReport | undefined;
  private lastAt: Date | undefined;
  private lastError: string | undefined;

  constructor(
    private readonly sql: Sql,
    private readonly config: Config,
    private readonly log: Logger,
    private readonly metrics: Metrics,
  ) {
    this.loop = new Periodic(() => this.runPass(), config.retention.prune_every);
  }

  /** Runs the first pass; a failure is logged, not thrown (ingest's commit makes a missing partition). */
  async start(): Promise<void> {
    await this.loop.runNow();
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** For /readyz: a held-back retention is reported, not counted as unready (ingest still works). */
  status(): Record<string, unknown> {
    const held = this.last?.held ?? [];
    return {
      last_pass_at: this.lastAt?.toISOString() ?? null,
      ...(this.lastError ? { error: this.lastError } : {}),
      partitions: this.last?.size.partitions ?? null,
      bytes: this.last?.size.bytes ?? null,
      held_back: held.length > 0,
      ...(held.length > 0 ? { held_by: held.slice(0, 10) } : {}),
    };
  }

  private async runPass(): Promise<void> {
    try {
      const report = await prune(this.sql, retentionOptions(this.config));
      if (!report.ran) return; // another instance's pass: its metrics are its own
      this.record(report);
    } catch (error) {
      this.lastError = (error as Error).message;
      this.log.warn({ err: error }, 'retention pass failed; retrying at the next one');
    }
  }

  private record(report: PruneReport): void {
    this.last = report;
    this.lastAt = new Date();
    this.lastError = undefined;
    const m = this.metrics;
    m.eventLogBytes.set(report.size.bytes);
    m.eventLogPartitions.set(report.size.partitions);
    m.eventLogOldestSeconds.set(
      report.size.oldestFrom ? (Date.now() - report.size.oldestFrom.getTime()) / 1000 : 0,
    );
    m.retentionHeld.set(new Set(report.held.map((h) => h.partition)).size);
    m.pruned.inc({ what: 'partitions' }, report.dropped.length);
    m.pruned.inc(
      { what: 'events' },
      report.dropped.reduce((n, d) => n + d.events, 0),
    );
    m.pruned.inc({ what: 'triggers' }, report.triggersCompacted);
    m.pruned.inc({ what: 'runs' }, report.runsPruned.runs);
    m.pruned.inc({ what: 'run_reports' }, report.runsPruned.reports);
    m.pruned.inc({ what: 'repair_requests' }, report.repairsPruned.requests);
    m.pruned.inc({ what: 'audit_entries' }, report.auditPruned);
    if (report.created.length > 0)
      this.log.info({ partitions: report.created }, 'event log partitions created');
    for (const d of report.dropped) this.log.info(d, 'event log partition dropped (past retention)');
    if (report.held.length > 0) {
      this.log.warn(
        { held: report.held.slice(0, 10) },
        'retention held back: a scheduler cursor has not passed events past retention (is the scheduler running?)',
      );
    }
  }
}
