import { formatPoint } from '../../core/bounds.js';
import { listAssets } from '../../index/assets.js';
import { configFrom, type GlobalOptions, withSql } from './shared.js';

interface StatusOptions extends GlobalOptions {
  readonly json?: boolean | undefined;
}

/** Assets, rollups (periods by state, last trigger) and the scheduler lease, read from PostgreSQL. */
export async function runStatus(values: StatusOptions): Promise<number> {
  const config = configFrom(values);
  return withSql(config, async (sql) => {
    const assets = (await listAssets(sql)).map((a) => ({
      asset: a.name,
      domain: a.domain,
      events: a.event_count,
      segments: a.segment_count,
      extent:
        a.covered_lo === null || a.covered_hi === null
          ? null
          : [formatPoint(a.domain, a.covered_lo), formatPoint(a.domain, a.covered_hi)],
    }));
    const rollups = await sql<
      { id: string; states: Record<string, number>; last: string | null; undelivered: number }[]
    >`
      select r.id,
        coalesce((select jsonb_object_agg(state, n) from
          (select state, count(*)::int as n from periods where rollup_id = r.id group by state) s), '{}') as states,
        (select idempotency_key from triggers where rollup_id = r.id order by decided_at desc limit 1) as last,
        (select count(*)::int from triggers where rollup_id = r.id and delivered_at is null and failed_at is null) as undelivered
      from rollups r order by r.id`;
    const leases = await sql<
      { name: string; holder: string | null; token: number; expires_in_s: number | null }[]
    >`
      select name, holder, token, extract(epoch from expires_at - clock_timestamp())::float8 as expires_in_s
      from scheduler_leases order by name`;
    if (values.json) {
      process.stdout.write(`${JSON.stringify({ assets, rollups, leases })}\n`);
      return 0;
    }
    const lines = [`assets (${assets.length}):`];
    for (const a of assets) {
      const extent = a.extent ? `[${a.extent[0]}, ${a.extent[1]})` : '(nothing covered)';
      lines.push(`  ${a.asset}  ${a.domain}  ${a.events} events  ${a.segments} segments  ${extent}`);
    }
    lines.push(`rollups (${rollups.length}):`);
    for (const r of rollups) {
      const states = Object.entries(r.states)
        .map(([s, n]) => `${n} ${s}`)
        .join(', ');
      lines.push(
        `  ${r.id}  ${states || 'no periods yet'}  last trigger ${r.last ?? 'none'}  undelivered ${r.undelivered}`,
      );
    }
    lines.push('scheduler lease:');
    for (const l of leases) {
      const live = l.expires_in_s !== null && l.expires_in_s > 0;
      lines.push(
        `  ${l.name}  ${live ? `held by ${l.holder} (token ${l.token}, ${l.expires_in_s!.toFixed(1)} s left)` : 'free'}`,
      );
    }
    if (leases.length === 0) lines.push('  never acquired');
    process.stdout.write(`${lines.join('\n')}\n`);
    return 0;
  });
}
