import { retentionOptions } from '../../daemon/retention-loop.js';
import { type PruneReport, prune } from '../../store/upkeep/retention.js';
import { commandConfig, type GlobalOptions, withSql } from './shared.js';

interface PruneOptions extends GlobalOptions {
  readonly 'dry-run'?: boolean | undefined;
  readonly json?: boolean | undefined;
}

/**
 * One retention pass now, as the daemon runs in the background (same config, same lock).
 * Exit 0 done; 1 when something past retention was held back, or another instance was pruning.
 */
export async function runPrune(values: PruneOptions): Promise<number> {
  const config = await commandConfig(values);
  const dryRun = values['dry-run'] ?? false;
  const report = await withSql(config, (sql) => prune(sql, retentionOptions(config, dryRun)));
  process.stdout.write(values.json ? `${JSON.stringify(report)}\n` : describe(report));
  return report.ran && report.held.length === 0 ? 0 : 1;
}

function describe(r: PruneReport): string {
  if (!r.ran) return 'another instance is pruning right now; nothing done (run again later)\n';
  const would = r.dryRun ? 'would ' : '';
  const lines = [
    ...(r.dryRun ? ['dry run: nothing changed'] : []),
    `${would}create ${r.created.length} partition(s)${r.created.length > 0 ? `: ${r.created.join(', ')}` : ''}`,
    `${would}drop ${r.dropped.length} partition(s) past retention, ${r.dropped.reduce((n, d) => n + d.events, 0)} event(s)`,
    ...r.dropped.map((d) => `  ${d.partition}  ${d.events} event(s)`),
    `${would}compact ${r.triggersCompacted} delivered trigger(s) past history retention`,
    `${would}delete ${r.runsPruned.runs} superseded run(s) past history retention, with ${r.runsPruned.reports} run report(s)`,
    `${would}delete ${r.repairsPruned.requests} decided repair request(s) past history retention, with ${r.repairsPruned.waiters} waiter(s) and ${r.repairsPruned.attempts} attempt(s)`,
    `${would}delete ${r.auditPruned} audit entr${r.auditPruned === 1 ? 'y' : 'ies'} past history retention`,
  ];
  if (r.held.length > 0) {
    lines.push('held back (a scheduler cursor has not passed these events; is the scheduler running?):');
    for (const h of r.held) {
      lines.push(
        `  ${h.partition}  rollup ${h.rollup}  upstream ${h.asset}  cursor ${h.cursor} < newest ${h.newest}`,
      );
    }
  }
  lines.push(
    `event log: ${r.size.partitions} partition(s), ${(r.size.bytes / 1024 ** 2).toFixed(1)} MiB, oldest from ${r.size.oldestFrom?.toISOString() ?? '(empty)'}`,
  );
  return `${lines.join('\n')}\n`;
}
