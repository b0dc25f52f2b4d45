/**
 * `repair` through a daemon's API: POST /v1/repairs, which makes the request as the database path
 * does (src/http/repair-request.ts), with the daemon's rollups and assets.
 */
import type { RepairAnswer } from '../../http/repair-request.js';
import { printRepair, type RepairOptions, repairArgs } from '../commands/repair-args.js';
import type { LinkFinder } from '../daemon-link.js';
import { ApiError, call } from '../http-client.js';

export async function repairOverHttp(
  args: readonly string[],
  values: RepairOptions,
  findLink: LinkFinder,
): Promise<number> {
  const parsed = repairArgs(args, values);
  if (typeof parsed === 'number') return parsed;
  const link = findLink();
  try {
    const { body } = await call<RepairAnswer>(link, 'POST', '/v1/repairs', parsed.ask);
    return printRepair(body, parsed.ask, values.json === true);
  } catch (error) {
    if (error instanceof ApiError && error.code === 'invalid_repair') return parsed.usage(error.message);
    throw error;
  }
}
