/**
 * The repair request as a target receives it (its field names are a public contract) and its
 * idempotency key per attempt. Pure.
 */
import { formatPoint } from './bounds.js';
import type { RepairKind, RepairRange } from './repair.js';
import type { Domain } from './types.js';

/** The idempotency key of attempt `attempt` of request `id`: readable, unique, free of ':'. */
export function repairKey(id: number, attempt: number): string {
  return `repair-${id}~a${attempt}`;
}

/** A request id and attempt from its key (the callback side), or null. */
export function parseRepairKey(key: string): { id: number; attempt: number } | null {
  const m = /^repair-(\d+)~a(\d+)$/.exec(key);
  return m ? { id: Number(m[1]), attempt: Number(m[2]) } : null;
}

/** The repair payload; field names are a public contract (docs/repairs.md). */
export interface RepairPayload {
  type: 'repair';
  asset: string;
  ranges: Array<{
    start: string | number;
    end: string | number;
    kind: RepairKind;
    required_version: string | null;
  }>;
  /** Every range owed when the request was made, and their measure (seconds for time), before `limit`. */
  ranges_total: number;
  missing_total: number;
  rollup: string | null;
  period: { start: string | number; end: string | number; key: string } | null;
  idempotency_key: string;
  attempt: number;
  requested_at: string;
}

export function repairPayload(input: {
  readonly id: number;
  readonly attempt: number;
  readonly asset: string;
  readonly ranges: readonly RepairRange[];
  readonly rangesTotal: number;
  readonly missingTotal: number;
  readonly rollup: string | null;
  readonly period: RepairPayload['period'];
  readonly format: (point: number) => string | number;
  /** Seconds per unit for `missing_total` (time: µs -> s); 1 for integers. */
  readonly unitSeconds: number;
  readonly requestedAt: Date;
}): RepairPayload {
  return {
    type: 'repair',
    asset: input.asset,
    ranges: input.ranges.map((r) => ({
      start: input.format(r.start),
      end: input.format(r.end),
      kind: r.kind,
      required_version: r.requiredVersion,
    })),
    ranges_total: input.rangesTotal,
    missing_total: input.missingTotal * input.unitSeconds,
    rollup: input.rollup,
    period: input.period,
    idempotency_key: repairKey(input.id, input.attempt),
    attempt: input.attempt,
    requested_at: input.requestedAt.toISOString(),
  };
}

/** What a request's payload is made of besides its id, attempt and ranges (as stored). */
export interface RequestFields {
  readonly asset: string;
  readonly domain: Domain;
  readonly rollupId: string | null;
  readonly period: RepairPayload['period'];
  readonly rangesTotal: number;
  readonly missingTotal: number;
}

/** Attempt `attempt` of request `id` asking for `ranges`, its bounds in the asset's own form. */
export function attemptPayload(
  request: RequestFields,
  id: number,
  attempt: number,
  ranges: readonly RepairRange[],
  requestedAt: Date,
): RepairPayload {
  return repairPayload({
    id,
    attempt,
    asset: request.asset,
    ranges,
    rangesTotal: request.rangesTotal,
    missingTotal: request.missingTotal,
    rollup: request.rollupId,
    period: request.period,
    format: (p) => formatPoint(request.domain, p),
    unitSeconds: request.domain === 'time' ? 1e-6 : 1,
    requestedAt,
  });
}
