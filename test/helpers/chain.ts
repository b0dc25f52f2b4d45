/**
 * Shared by the chain tests, the cascade fault suite and bench:chain: one level of a raw -> hourly
 * -> daily -> monthly chain as config, and the condition under which a chain has nothing left to do.
 */
import type { Db } from '../../src/store/pg/db.js';

/** A chain level: reads `upstream`, writes `agg.{id}`, reruns on replay, its own target queue. */
export function chainLevel(
  id: string,
  upstream: string,
  every: string,
  { backoff = 'PT0.5S', queue = `${id}-runs` }: { backoff?: string; queue?: string } = {},
) {
  return {
    id,
    upstream: [upstream],
    every,
    begin: '2026-11-01',
    rerun: 'on_replay',
    run: { retries: 2, backoff, timeout: 'PT5M' },
    output: `agg.${id}`,
    target: { type: 'queue', queue },
  };
}

/**
 * Nothing left to happen: every upstream event marked, no period dirty, due or owing a rerun, no
 * run open or waiting for a retry. Any further rerun would first show up as one of these.
 */
export async function chainSettled(db: Db): Promise<boolean> {
  const [row] = await db<{ busy: boolean }[]>`
    select exists (select 1 from rollup_cursors c join assets a on a.name = c.asset_name where c.seq < a.last_seq)
      or exists (select 1 from periods where dirty or manual_requested or due_at is not null or state = 'rerun_pending')
      or exists (select 1 from runs where state in ('pending', 'started', 'running') or next_retry_at is not null)
      as busy`;
  return !row!.busy;
}
