import { formatPoint } from '../../core/bounds.js';
import { listAssets } from '../../index/assets.js';
import { configFrom, type GlobalOptions, withSql } from './shared.js';

interface StatusOptions extends GlobalOptions {
  readonly json?: boolean | undefined;
}

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
    if (values.json) {
      process.stdout.write(`${JSON.stringify({ assets })}\n`);
      return 0;
    }
    const lines = [`assets (${assets.length}):`];
    for (const a of assets) {
      const extent = a.extent ? `[${a.extent[0]}, ${a.extent[1]})` : '(nothing covered)';
      lines.push(`  ${a.asset}  ${a.domain}  ${a.events} events  ${a.segments} segments  ${extent}`);
    }
    process.stdout.write(`${lines.join('\n')}\n`);
    return 0;
  });
}
