/**
 * Freshness of an asset: how far its complete coverage reaches, how long ago that was,
 * and whether that breaks the asset's expectation. Pure: `now` is a parameter.
 */
import { formatPoint } from './bounds.js';
import type { Domain } from './types.js';

export interface FreshnessFacts {
  readonly domain: Domain;
  /** End of the newest complete segment (µs for time, the value for integers); null when none. */
  readonly coveredUntil: number | null;
  /** When the index accepted the asset's newest event (epoch ms); null before the first. */
  readonly lastEventAt: number | null;
  /** The configured `freshness.max_lag` in ms; undefined when the asset has none. */
  readonly maxLagMs?: number | undefined;
}

/** The freshness fields of the coverage answer, `/v1/assets` and `status`. */
export interface FreshnessJson {
  covered_until: string | number | null;
  /** now − covered_until in seconds (0 when coverage reaches past now); null for integer assets. */
  lag_seconds: number | null;
  last_event_at: string | null;
  /** The expectation as an ISO 8601 duration; null when none is configured. */
  max_lag: string | null;
  /** Whether the expectation is broken; null when none is configured. */
  stale: boolean | null;
  /** Why it is stale, in one sentence; null when it is not. */
  stale_reason: string | null;
}

const round3 = (x: number): number => Math.round(x * 1000) / 1000;

/**
 * An integer asset has no clock to compare its coverage with, so its lag is null and its
 * expectation is judged on idle time instead: stale when no event arrived within max_lag.
 */
export function freshnessOf(facts: FreshnessFacts, nowMs: number): FreshnessJson {
  const { domain, coveredUntil, lastEventAt, maxLagMs } = facts;
  const lagMs =
    domain === 'time' && coveredUntil !== null ? Math.max(0, nowMs - Math.floor(coveredUntil / 1000)) : null;
  let reason: string | null = null;
  const ago = (ms: number) => `${formatIsoDuration(Math.round(ms / 1000) * 1000)} ago`;
  if (maxLagMs !== undefined) {
    const limit = formatIsoDuration(maxLagMs);
    if (domain === 'time') {
      if (lagMs === null) reason = `nothing is covered yet (max_lag ${limit})`;
      else if (lagMs > maxLagMs)
        reason = `covered until ${formatPoint(domain, coveredUntil!)}, ${ago(lagMs)}, more than max_lag ${limit}`;
    } else if (lastEventAt === null) reason = `no event has arrived yet (max_lag ${limit})`;
    else if (nowMs - lastEventAt > maxLagMs)
      reason = `last event ${ago(nowMs - lastEventAt)}, more than max_lag ${limit}`;
  }
  return {
    covered_until: coveredUntil === null ? null : formatPoint(domain, coveredUntil),
    lag_seconds: lagMs === null ? null : round3(lagMs / 1000),
    last_event_at: lastEventAt === null ? null : new Date(lastEventAt).toISOString(),
    max_lag: maxLagMs === undefined ? null : formatIsoDuration(maxLagMs),
    stale: maxLagMs === undefined ? null : reason !== null,
    stale_reason: reason,
  };
}

/** Milliseconds as an ISO 8601 duration in hours, minutes and seconds: PT20M, PT26H3M, PT0.5S. */
export function formatIsoDuration(ms: number): string {
  const total = Math.max(0, Math.round(ms));
  const hours = Math.floor(total / 3_600_000);
  const minutes = Math.floor((total % 3_600_000) / 60_000);
  const seconds = (total % 60_000) / 1000;
  const parts = `${hours ? `${hours}H` : ''}${minutes ? `${minutes}M` : ''}${seconds ? `${seconds}S` : ''}`;
  return `PT${parts || '0S'}`;
}
