import type { Coverage } from './coverage.js';
import { type ReplayRequiredJson, replayRequiredJson, type SpanJson, spanJson } from './coverage-answer.js';
import type { TriggerReason } from './policy.js';
import { runId } from './runs.js';
import type { Domain } from './types.js';

/** The trigger payload; field names are a public contract (docs/rollups.md). */
export interface TriggerPayload {
  rollup: string;
  idempotency_key: string;
  generation: number;
  reason: TriggerReason;
  period: SpanJson & { key: string };
  upstreams: Record<
    string,
    { ratio: number; missing: SpanJson[]; replay_required: ReplayRequiredJson[]; versions: string[] }
  >;
  decided_at: string;
  /** Which attempt of this generation's run this delivery is: 1, then 2, 3, ... on retries. */
  attempt: number;
  /** The attempt's own id: the idempotency key for attempt 1, `<key>~aN` after (see core/runs.ts). */
  run_id: string;
}

/**
 * What names a run and its period, without the coverage figures: what a target needs to find a
 * run it was given (its ids, its period, when it was decided).
 */
export type RunIdentity = Omit<TriggerPayload, 'upstreams'>;

/**
 * Readable, deterministic and free of ':' (BullMQ refuses custom job ids with colons):
 * `orders_daily@20250601T000000Z#1`, or `offsets@4096#2` for integer buckets.
 */
export function idempotencyKey(
  rollup: string,
  domain: Domain,
  periodStart: number,
  generation: number,
): string {
  return `${rollup}@${domain === 'time' ? compactTime(periodStart) : periodStart}#${generation}`;
}

function compactTime(micros: number): string {
  const iso = new Date(Math.floor(micros / 1000)).toISOString(); // 2025-06-01T00:00:00.000Z
  const sub = ((micros % 1_000_000) + 1_000_000) % 1_000_000;
  const base = iso.slice(0, 19).replace(/[-:]/g, '');
  return sub === 0 ? `${base}Z` : `${base}.${String(sub).padStart(6, '0')}Z`;
}

export interface PayloadInput {
  readonly rollup: string;
  readonly generation: number;
  readonly reason: TriggerReason;
  readonly period: { readonly start: string | number; readonly end: string | number; readonly key: string };
  readonly periodStart: number;
  readonly domain: Domain;
  readonly upstreams: ReadonlyMap<string, { readonly domain: Domain; readonly coverage: Coverage | null }>;
  readonly decidedAt: Date;
}

export function buildPayload(input: PayloadInput): TriggerPayload {
  const upstreams: TriggerPayload['upstreams'] = {};
  for (const [asset, { domain, coverage }] of input.upstreams) {
    upstreams[asset] = coverage
      ? {
          ratio: coverage.ratio,
          missing: coverage.missing.map((m) => spanJson(domain, m)),
          replay_required: coverage.replayRequired.map((r) => replayRequiredJson(domain, r)),
          versions: coverage.versions,
        }
      : {
          ratio: 0,
          missing: [{ start: input.period.start, end: input.period.end }],
          replay_required: [],
          versions: [],
        };
  }
  const key = idempotencyKey(input.rollup, input.domain, input.periodStart, input.generation);
  return {
    rollup: input.rollup,
    idempotency_key: key,
    generation: input.generation,
    reason: input.reason,
    period: input.period,
    upstreams,
    decided_at: input.decidedAt.toISOString(),
    attempt: 1,
    run_id: key,
  };
}

/** The payload of attempt `attempt` of a decided trigger: the decision's, with its own run id. */
export function attemptPayload<P extends RunIdentity>(payload: P, attempt: number): P {
  return { ...payload, attempt, run_id: runId(payload.idempotency_key, attempt) };
}
