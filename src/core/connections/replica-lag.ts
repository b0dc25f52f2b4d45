/**
 * How far a streaming replica is behind its primary, measured by WAL position rather than by
 * `now() - pg_last_xact_replay_timestamp()` (which grows while the primary is idle, though the
 * replica then lacks nothing). The daemon samples the primary's `pg_current_wal_insert_lsn()`, each
 * sample stamped with the daemon's clock read just BEFORE asking: every transaction the primary had
 * acknowledged by then lies below that position, even one committed with synchronous_commit off
 * (acknowledged before its WAL is written, so possibly past `pg_current_wal_lsn()`). So once the replica has replayed past a sample's
 * position, it reflects the primary as of that sample's time at least: that time is the replica's
 * `as_of`, and now − as_of its lag. The lag is overstated by up to one sampling interval, never
 * understated. Pure: times are parameters.
 */

export interface WalSample {
  /** Epoch ms (daemon clock) read before the primary was asked. */
  readonly at: number;
  readonly lsn: bigint;
}

/** `pg_lsn` text, e.g. `16/B374D848`: two hexadecimal 32-bit halves. */
export function parseLsn(text: string): bigint {
  const match = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(text);
  if (!match) throw new Error(`not a WAL position: ${JSON.stringify(text)}`);
  return (BigInt(`0x${match[1]}`) << 32n) | BigInt(`0x${match[2]}`);
}

/** Sizes of the WAL page headers on 64-bit builds: a segment's first page has the long one. */
const SHORT_PAGE_HEADER = 24n;
const LONG_PAGE_HEADER = 40n;

/**
 * The insert position as a replay position can reach it. Right after a page (or segment) boundary
 * the insert position points past the new page's header, while a replica that has replayed every
 * record stops at the boundary (an idle primary after pg_switch_wal() shows X/4000028 against the
 * replica's X/4000000); no record data lies in between, so the boundary is the same point.
 */
export function recordBoundary(insertLsn: bigint, blockSize: bigint, segmentSize: bigint): bigint {
  if (insertLsn % segmentSize === LONG_PAGE_HEADER) return insertLsn - LONG_PAGE_HEADER;
  if (insertLsn % blockSize === SHORT_PAGE_HEADER) return insertLsn - SHORT_PAGE_HEADER;
  return insertLsn;
}

export interface ReplicaPosition {
  /** Epoch ms the replica's data reflects the primary at; null when no kept sample says. */
  readonly asOf: number | null;
  /** now − as_of; when as_of is unknown, a lower bound: now − the oldest kept sample. */
  readonly lagMs: number;
}

/**
 * The primary's recent WAL positions. Samples older than the newest one a replica has passed are
 * of no further use (replay only moves forward) and are dropped; so are samples older than
 * `keepMs`, which bounds memory while a replica is stuck.
 */
export class WalHistory {
  private samples: WalSample[] = [];

  constructor(private readonly keepMs: number) {}

  add(sample: WalSample): void {
    this.samples.push(sample);
    const cutoff = sample.at - this.keepMs;
    const stale = this.samples.findIndex((s) => s.at >= cutoff);
    if (stale > 0) this.samples = this.samples.slice(stale);
  }

  /** Where a replica that has replayed up to `replayLsn` stands at `nowMs`. */
  position(replayLsn: bigint, nowMs: number): ReplicaPosition {
    let passed = -1;
    for (let i = this.samples.length - 1; i >= 0; i--) {
      if (this.samples[i]!.lsn <= replayLsn) {
        passed = i;
        break;
      }
    }
    if (passed < 0) {
      const oldest = this.samples[0];
      return { asOf: null, lagMs: oldest === undefined ? 0 : Math.max(0, nowMs - oldest.at) };
    }
    if (passed > 0) this.samples = this.samples.slice(passed);
    const asOf = this.samples[0]!.at;
    return { asOf, lagMs: Math.max(0, nowMs - asOf) };
  }
}

/** Why reads go where they go; `ok` is the only state in which the replica serves them. */
export type ReplicaState = 'starting' | 'ok' | 'lagging' | 'unavailable' | 'not_a_replica' | 'schema_behind';

/**
 * The replica serves a read only when its last probe found it a healthy replica and it reflects
 * the primary as of at most `maxLagMs` ago, judged at the moment of the read: a replica whose
 * probes stop answering ages out by itself.
 */
export function readState(
  probed: Exclude<ReplicaState, 'lagging'>,
  asOf: number | null,
  nowMs: number,
  maxLagMs: number,
): ReplicaState {
  if (probed !== 'ok') return probed;
  return asOf !== null && nowMs - asOf <= maxLagMs ? 'ok' : 'lagging';
}
