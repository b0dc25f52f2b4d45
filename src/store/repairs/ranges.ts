/** Repair ranges as `repair_requests.ranges` stores them (jsonb), and spans as multirange literals. */

import type { RepairKind, RepairRange } from '../../core/repairs/repair.js';
import type { Interval } from '../../core/types.js';

/** Ranges as stored in `ranges` (jsonb). */
export interface StoredRange {
  lo: number;
  hi: number;
  kind: RepairKind;
  required_version: string | null;
}

export const toStored = (r: RepairRange): StoredRange => ({
  lo: r.start,
  hi: r.end,
  kind: r.kind,
  required_version: r.requiredVersion,
});
export const fromStored = (r: StoredRange): RepairRange => ({
  start: r.lo,
  end: r.hi,
  kind: r.kind,
  requiredVersion: r.required_version,
});

/** An int8multirange literal of normalized intervals. */
export function multirange(set: readonly Interval[]): string {
  return `{${set.map((r) => `[${r.start},${r.end})`).join(',')}}`;
}
