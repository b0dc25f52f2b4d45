/**
 * `status` against a daemon's API: GET /v1/assets and GET /v1/rollups (every page), and the
 * scheduler lease as this daemon sees it (GET /readyz), printed as the database path prints them
 * and in its order (stale assets first, then the furthest behind; rollups worst first).
 */
import type { StateCounts } from '../../core/periods/periods.js';
import { compareWorstFirst, failedRunCount } from '../../core/rollups/rollup-rank.js';
import type { RunState } from '../../core/runs/runs.js';
import { type StatusAsset, type StatusRollup, statusLines } from '../commands/status-text.js';
import type { DaemonLink, LinkFinder } from '../daemon-link.js';
import { call } from '../http-client.js';

interface Page {
  readonly next_cursor: string | null;
}

interface RollupItem {
  readonly id: string;
  readonly periods: StateCounts;
  readonly runs: Partial<Record<RunState, number>>;
  readonly last_trigger: string | null;
  readonly undelivered: number;
}

interface Readiness {
  readonly scheduler?: {
    readonly name?: string;
    readonly instance?: string;
    readonly role?: string;
    readonly token?: number | null;
    readonly expiresInMs?: number | null;
  };
}

export async function statusOverHttp(
  values: { readonly json?: boolean | undefined },
  findLink: LinkFinder,
): Promise<number> {
  const link = findLink();
  const [assets, items, ready] = await Promise.all([
    every<StatusAsset>(link, '/v1/assets', 'assets'),
    every<RollupItem>(link, '/v1/rollups', 'rollups'),
    readiness(link),
  ]);
  assets.sort(staleFirst);
  const rollups: StatusRollup[] = items
    .map((r) => ({ id: r.id, counts: r.periods, failed: failedRunCount(r.runs), item: r }))
    .sort(compareWorstFirst)
    .map(({ item, failed }) => ({
      id: item.id,
      periods: item.periods,
      failed_runs: failed,
      last_trigger: item.last_trigger,
      undelivered: item.undelivered,
    }));
  const scheduler = ready.scheduler;
  if (values.json) {
    // The database path's shape (assets, rollups, leases), the lease as this daemon knows it.
    const leases =
      scheduler?.role === 'leader'
        ? [
            {
              name: scheduler.name,
              holder: scheduler.instance,
              token: scheduler.token,
              expires_in_s: (scheduler.expiresInMs ?? 0) / 1000,
            },
          ]
        : [];
    const body = { daemon: link.url, assets, rollups, leases, scheduler: scheduler ?? null };
    process.stdout.write(`${JSON.stringify(body)}\n`);
    return 0;
  }
  process.stdout.write(
    `${[`daemon: ${link.url}`, ...statusLines(assets, rollups, leaseLines(scheduler))].join('\n')}\n`,
  );
  return 0;
}

/** Every page of a listing. */
async function every<T>(link: DaemonLink, path: string, field: string): Promise<T[]> {
  const all: T[] = [];
  let cursor: string | null = null;
  do {
    const query: string =
      cursor === null ? '?limit=1000' : `?limit=1000&cursor=${encodeURIComponent(cursor)}`;
    const { body } = await call<Page & Record<string, T[]>>(link, 'GET', `${path}${query}`);
    all.push(...(body[field] ?? []));
    cursor = body.next_cursor;
  } while (cursor !== null);
  return all;
}

/** /readyz answers 503 with the same body while a dependency is down: the lease is still worth showing. */
async function readiness(link: DaemonLink): Promise<Readiness> {
  try {
    return (await call<Readiness>(link, 'GET', '/readyz')).body;
  } catch (error) {
    const body = (error as { body?: Readiness }).body;
    if (body !== undefined) return body;
    throw error;
  }
}

/** As the status page and the database path order them: stale first, then time assets by lag (none covered first), then by name. */
function staleFirst(a: StatusAsset, b: StatusAsset): number {
  const key = (x: StatusAsset) => [
    x.stale === true ? 0 : 1,
    x.domain === 'time' ? 0 : 1,
    x.lag_seconds === null && x.domain === 'time' ? Number.NEGATIVE_INFINITY : -(x.lag_seconds ?? 0),
  ];
  const [ka, kb] = [key(a), key(b)];
  for (let i = 0; i < ka.length; i++) if (ka[i] !== kb[i]) return ka[i]! - kb[i]!;
  return a.asset < b.asset ? -1 : a.asset > b.asset ? 1 : 0;
}

/** The lease as this daemon holds or awaits it. */
function leaseLines(scheduler: Readiness['scheduler']): string[] {
  if (scheduler === undefined)
    return ['  this daemon does not schedule (no rollups, or scheduler.enabled: false)'];
  const { name, instance, role, token, expiresInMs } = scheduler;
  if (role === 'leader')
    return [
      `  ${name}  held by ${instance} (token ${token}, ${((expiresInMs ?? 0) / 1000).toFixed(1)} s left)`,
    ];
  return [`  ${name}  ${role === 'standby' ? 'held elsewhere: this daemon stands by' : (role ?? 'unknown')}`];
}
