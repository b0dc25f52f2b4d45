/**
 * `coverage-rollup repair ASSET --start S --end E [--target T]`: a repair request by hand
 * (no rollup needed) for the not-complete ranges of [S, E) that no open request already asks
 * for. It is stored like the scheduler's requests and delivered, followed, re-sent and abandoned by
 * the lease holder; the target is --target, else the repair target of a rollup reading ASSET.
 * This is the database path (--config); src/cli/remote/repair.ts asks a daemon's API to make it.
 */
import { defineRollups } from '../../config/rollups.js';
import { RepairRefused, requestRepair } from '../../http/repair-request.js';
import { printRepair, type RepairOptions, repairArgs } from './repair-args.js';
import { commandConfig, type GlobalOptions, withSql } from './shared.js';

export async function runRepair(
  args: readonly string[],
  values: RepairOptions & GlobalOptions,
): Promise<number> {
  const parsed = repairArgs(args, values);
  if (typeof parsed === 'number') return parsed;
  const config = await commandConfig(values);
  const rollups = defineRollups(config);
  return withSql(config, async (sql) => {
    try {
      const answer = await requestRepair(
        sql,
        config.assets,
        rollups,
        parsed.ask,
        (f) => `--${f}`,
        Date.now(),
      );
      return printRepair(answer, parsed.ask, values.json === true);
    } catch (error) {
      if (!(error instanceof RepairRefused)) throw error;
      return parsed.usage(error.message);
    }
  });
}
