import { formatIsoDuration } from '../../core/freshness.js';
import {
  parseLsn,
  type ReplicaState,
  readState,
  recordBoundary,
  WalHistory,
} from '../../core/replica-lag.js';
import type { Logger } from '../../support/log.js';
import { appliedVersion, latestVersion } from '../upkeep/migrate.js';
import type { Sql } from './db.js';

/** Where one read goes, and how old what it reads may be. */
export interface ReadHandle {
  readonly sql: Sql;
  /** Epoch ms the replica's data reflects the primary at; null when reading the primary itself. */
  readonly asOf: number | null;
}

export interface ReplicaOptions {
  /** The primary: only its WAL position (and page sizes) is asked of it. */
  readonly primary: Sql;
  /** A read-only pool on the replica (connect(..., {readOnly: true})). */
  readonly replica: Sql;
  readonly maxLagMs: number;
  readonly log: Logger;
  /** Called after every probe with the lag in seconds (a lower bound when as_of is unknown). */
  readonly onLag?: (seconds: number, servingReads: boolean) => void;
  readonly probeEveryMs?: number;
}

/** Probes that hang (a blackholed replica) must not stop the loop: the lag ages meanwhile. */
const PROBE_TIMEOUT_MS = 2000;
/** How far back WAL samples are kept: a replica further behind has no as_of, only a lag bound. */
const HISTORY_MS = 10 * 60_000;

/**
 * Routes reads to a streaming replica while it is healthy and at most `maxLagMs` behind, and to
 * the primary otherwise (docs/operations.md "A read replica"). A probe every `probeEveryMs` samples
 * the primary's WAL position and the replica's replay position (core/replica-lag.ts). The replica
 * pool is only ever read: migrations, writes, the lease and the scheduler use the primary's pools.
 */
export class ReadReplica {
  private readonly history = new WalHistory(HISTORY_MS);
  private readonly probeEveryMs: number;
  private probed: Exclude<ReplicaState, 'lagging'> = 'starting';
  private asOf: number | null = null;
  private lagBytes: bigint | null = null;
  private error: string | undefined;
  private schemaCurrent = false;
  private walSizes: { block: bigint; segment: bigint } | undefined;
  /** Whether reads went to the replica after the last probe; undefined before the first. */
  private serving: boolean | undefined;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly options: ReplicaOptions) {
    this.probeEveryMs = options.probeEveryMs ?? 250;
  }

  /** Runs the first probe, so a healthy replica serves reads from the first request on. */
  async start(): Promise<void> {
    await this.probe();
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  read(nowMs = Date.now()): ReadHandle {
    if (readState(this.probed, this.asOf, nowMs, this.options.maxLagMs) !== 'ok') {
      return { sql: this.options.primary, asOf: null };
    }
    return { sql: this.options.replica, asOf: this.asOf };
  }

  /** For /readyz. A replica that cannot serve never makes the instance unready: reads use the primary. */
  status(nowMs = Date.now()): Record<string, unknown> {
    const state = readState(this.probed, this.asOf, nowMs, this.options.maxLagMs);
    return {
      status: state,
      reads: state === 'ok' ? 'replica' : 'primary',
      lag_seconds: this.asOf === null ? null : Math.max(0, nowMs - this.asOf) / 1000,
      as_of: this.asOf === null ? null : new Date(this.asOf).toISOString(),
      lag_bytes: this.lagBytes === null ? null : Number(this.lagBytes),
      max_lag: formatIsoDuration(this.options.maxLagMs),
      ...(this.error ? { error: this.error } : {}),
    };
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.probe().finally(() => this.schedule());
    }, this.probeEveryMs);
    this.timer.unref();
  }

  private probe(): Promise<void> {
    this.running = this.runProbe();
    return this.running;
  }

  private async runProbe(): Promise<void> {
    const { primary, replica } = this.options;
    let asking = 'primary';
    try {
      this.walSizes ??= await within(walSizes(primary));
      const at = Date.now(); // before asking: what the primary acknowledged by now is below its answer
      const [{ lsn }] = await within(
        primary<[{ lsn: string }]>`select pg_current_wal_insert_lsn()::text as lsn`,
      );
      const primaryLsn = recordBoundary(parseLsn(lsn), this.walSizes.block, this.walSizes.segment);
      this.history.add({ at, lsn: primaryLsn });
      asking = 'replica';
      const [row] = await within(
        replica<[{ recovering: boolean; replay: string | null }]>`
          select pg_is_in_recovery() as recovering, pg_last_wal_replay_lsn()::text as replay`,
      );
      if (!row.recovering || row.replay === null) {
        // A promoted replica, or a URL naming a primary: its data would stop following ours.
        this.error = 'database_read_url names a server not in recovery (not a streaming replica)';
        this.set('not_a_replica', null, 0, null);
        return;
      }
      this.error = undefined;
      // The daemon's queries need the primary's schema; a replica replays a migration a little late.
      this.schemaCurrent ||= (await within(appliedVersion(replica))) === latestVersion();
      const replayLsn = parseLsn(row.replay);
      const position = this.history.position(replayLsn, Date.now());
      const behind = primaryLsn - replayLsn;
      this.set(
        this.schemaCurrent ? 'ok' : 'schema_behind',
        position.asOf,
        position.lagMs,
        behind > 0n ? behind : 0n,
      );
    } catch (error) {
      this.error = `${asking}: ${(error as Error).message}`;
      this.set('unavailable', this.asOf, this.asOf === null ? 0 : Date.now() - this.asOf, this.lagBytes);
    }
  }

  private set(
    probed: Exclude<ReplicaState, 'lagging'>,
    asOf: number | null,
    lagMs: number,
    lagBytes: bigint | null,
  ): void {
    this.probed = probed;
    this.asOf = asOf;
    this.lagBytes = lagBytes;
    const state = readState(probed, asOf, Date.now(), this.options.maxLagMs);
    const serving = state === 'ok';
    if (serving !== this.serving) {
      const facts = { replica: state, lag_seconds: lagMs / 1000, error: this.error };
      if (serving) this.options.log.info(facts, 'reads go to the replica');
      else this.options.log.warn(facts, 'reads go to the primary: the replica cannot serve them');
    }
    this.serving = serving;
    this.options.onLag?.(lagMs / 1000, serving);
  }
}

async function walSizes(primary: Sql): Promise<{ block: bigint; segment: bigint }> {
  const [row] = await primary<[{ block: string; segment: string }]>`
    select current_setting('wal_block_size') as block,
      pg_size_bytes(current_setting('wal_segment_size'))::text as segment`;
  return { block: BigInt(row.block), segment: BigInt(row.segment) };
}

function within<T>(work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${PROBE_TIMEOUT_MS} ms`)), PROBE_TIMEOUT_MS);
  });
  work.catch(() => {}); // settles harmlessly after the limit
  return Promise.race([work, limit]).finally(() => clearTimeout(timer));
}
