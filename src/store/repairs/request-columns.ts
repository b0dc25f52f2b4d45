/**
 * The columns of `repair_requests` that both the scheduler's follow (follow.ts) and the API's
 * listings (listings.ts) read, as the rows come and as the code names them: one mapping for both.
 */

import type { RepairRange, RepairState } from '../../core/repairs/repair.js';
import type { RepairPayload } from '../../core/repairs/repair-payload.js';
import type { Domain } from '../../core/types.js';
import { fromStored, type StoredRange } from './ranges.js';

export interface RequestColumns {
  readonly id: number;
  readonly asset: string;
  readonly domain: Domain;
  readonly rollupId: string | null;
  readonly period: RepairPayload['period'];
  readonly state: RepairState;
  readonly ranges: RepairRange[];
  readonly rangesTotal: number;
  readonly missingTotal: number;
  readonly attempt: number;
  readonly attempts: number;
  readonly requestedAt: Date;
}

/** The same columns as a statement selects them (`r.id, r.asset, … r.requested_at`). */
export interface RawRequestColumns {
  id: number;
  asset: string;
  domain: Domain;
  rollup_id: string | null;
  period: RepairPayload['period'];
  state: RepairState;
  ranges: StoredRange[];
  ranges_total: number;
  missing_total: number;
  attempt: number;
  attempts: number;
  requested_at: Date;
}

export const requestColumns = (r: RawRequestColumns): RequestColumns => ({
  id: r.id,
  asset: r.asset,
  domain: r.domain,
  rollupId: r.rollup_id,
  period: r.period,
  state: r.state,
  ranges: r.ranges.map(fromStored),
  rangesTotal: r.ranges_total,
  missingTotal: r.missing_total,
  attempt: r.attempt,
  attempts: r.attempts,
  requestedAt: r.requested_at,
});
