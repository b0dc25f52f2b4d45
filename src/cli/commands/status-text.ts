/** `status` for people: assets with their freshness, rollups by period state, the scheduler lease. */
import { formatLength } from '../../http/status/draw/format.js';
import { plural } from '../format.js';

/** An asset as GET /v1/assets answers it (the fields status prints). */
export interface StatusAsset {
  readonly asset: string;
  readonly domain: string;
  readonly event_count: number;
  readonly segment_count: number;
  readonly covered_extent: { readonly start: string | number; readonly end: string | number } | null;
  readonly covered_until: string | number | null;
  readonly lag_seconds: number | null;
  readonly last_event_at: string | null;
  readonly max_lag: string | null;
  readonly stale: boolean | null;
  readonly stale_reason: string | null;
}

export interface StatusRollup {
  readonly id: string;
  readonly periods: Readonly<Record<string, number>>;
  readonly failed_runs: number;
  readonly last_trigger: string | null;
  readonly undelivered: number;
}

export interface LeaseRow {
  readonly name: string;
  readonly holder: string | null;
  readonly token: number;
  readonly expires_in_s: number | null;
}

/** `noRollups`: what to say instead of an empty list (why there are none), if anything. */
export function statusLines(
  assets: readonly StatusAsset[],
  rollups: readonly StatusRollup[],
  lease: readonly string[],
  noRollups?: string,
): string[] {
  const lines = [`assets (${assets.length}):`];
  for (const a of assets) {
    const extent = a.covered_extent
      ? `[${a.covered_extent.start}, ${a.covered_extent.end})`
      : '(nothing covered)';
    lines.push(
      `  ${a.asset}  ${a.domain}  ${plural(a.event_count, 'event')}  ${plural(a.segment_count, 'segment')}  ${extent}`,
    );
    // The page's units: 2h 5m, not 7500 s (--json keeps lag_seconds exact).
    const lag = a.lag_seconds === null ? '' : `, lag ${formatLength('time', a.lag_seconds * 1_000_000)}`;
    const until = a.covered_until === null ? 'nothing complete' : `covered until ${a.covered_until}${lag}`;
    const stale = a.stale
      ? `  STALE: ${a.stale_reason}`
      : a.stale === false
        ? `  fresh (max_lag ${a.max_lag})`
        : '';
    lines.push(`    ${until}, last event at ${a.last_event_at ?? 'never'}${stale}`);
  }
  lines.push(`rollups (${rollups.length}):`);
  for (const r of rollups) {
    const states = Object.entries(r.periods)
      .filter(([, n]) => n > 0)
      .map(([s, n]) => `${n} ${s}`)
      .join(', ');
    const failed = r.failed_runs > 0 ? `  ${plural(r.failed_runs, 'failed run')}` : '';
    lines.push(
      `  ${r.id}  ${states || 'no periods yet'}${failed}  last trigger ${r.last_trigger ?? 'none'}  undelivered ${r.undelivered}`,
    );
  }
  if (rollups.length === 0 && noRollups !== undefined) lines.push(`  (${noRollups})`);
  lines.push('scheduler lease:', ...lease);
  return lines;
}

/** The lease rows as the database holds them. */
export function leaseLines(leases: readonly LeaseRow[]): string[] {
  const lines: string[] = [];
  for (const l of leases) {
    const live = l.expires_in_s !== null && l.expires_in_s > 0;
    lines.push(
      `  ${l.name}  ${live ? `held by ${l.holder} (token ${l.token}, ${l.expires_in_s!.toFixed(1)} s left)` : 'free'}`,
    );
  }
  if (leases.length === 0) lines.push('  never acquired');
  return lines;
}
