/**
 * The event log's partitions by ingest time: names, which to create ahead, which retention lets go.
 * Bounds are Unix seconds; a partition holds [lo, hi). Pure: `now` is a parameter.
 */

export interface PartitionBounds {
  readonly name: string;
  /** 0 for the first partition, which starts at MINVALUE. */
  readonly lo: number;
  readonly hi: number;
}

const NAME = /^events_p(\d+)_(\d+)$/;

export function partitionName(lo: number, hi: number): string {
  return `events_p${lo}_${hi}`;
}

/** The bounds a partition's name encodes, or null for a table that is not one of ours. */
export function parsePartitionName(name: string): PartitionBounds | null {
  const m = NAME.exec(name);
  return m ? { name, lo: Number(m[1]), hi: Number(m[2]) } : null;
}

export interface AheadPlan {
  /** Partition width in seconds. */
  readonly widthSeconds: number;
  /** Partitions must reach at least this far past now, in seconds. */
  readonly aheadSeconds: number;
  readonly nowSeconds: number;
}

/**
 * The partitions to create so the log reaches `now + ahead`, on a grid of `width` from the Unix
 * epoch, continuing from the newest existing partition. After a long stop, one catch-up partition
 * spans the gap up to the current grid step (rows of that time cannot arrive any more: ingest time
 * is the commit's `now()`), rather than one per missed step.
 */
export function partitionsToCreate(existingHi: readonly number[], plan: AheadPlan): Array<[number, number]> {
  const { widthSeconds: w, aheadSeconds, nowSeconds } = plan;
  if (!(Number.isInteger(w) && w > 0))
    throw new RangeError(`partition width must be a whole number of seconds > 0, got ${w}`);
  const until = nowSeconds + Math.max(aheadSeconds, 0);
  const current = Math.floor(nowSeconds / w) * w;
  let lo = existingHi.length > 0 ? Math.max(...existingHi) : current;
  const out: Array<[number, number]> = [];
  if (lo < current) {
    out.push([lo, current]);
    lo = current;
  }
  while (lo <= until) {
    const hi = (Math.floor(lo / w) + 1) * w;
    out.push([lo, hi]);
    lo = hi;
  }
  return out;
}

/** Whether every row a partition can hold is older than the retention window. */
export function pastRetention(p: PartitionBounds, retentionSeconds: number, nowSeconds: number): boolean {
  return p.hi <= nowSeconds - retentionSeconds;
}
