/**
 * `retry` through a daemon's API: POST /v1/rollups/{id}/periods/{key}/retry for one period, or for
 * each period of a window whose current run failed, timed out or was lost (found with the period
 * listing's run_state filter). The daemon knows the rollup, its calendar and its keys.
 */
import type { RunState } from '../../core/runs/runs.js';
import {
  MAX_RETRIES,
  printRetried,
  type RetryOptions,
  type RetryResult,
  retryArgs,
  retryUsage as usage,
} from '../commands/retry-args.js';
import type { DaemonLink, LinkFinder } from '../daemon-link.js';
import { ApiError, call } from '../http-client.js';

const RETRYABLE: readonly RunState[] = ['failed', 'timed_out', 'lost'];

export async function retryOverHttp(
  args: readonly string[],
  values: RetryOptions,
  findLink: LinkFinder,
): Promise<number> {
  const id = retryArgs(args, values);
  if (typeof id === 'number') return id;
  const link = findLink();
  let keys: string[];
  try {
    keys =
      values.period !== undefined
        ? [values.period]
        : await retryableKeys(link, id, values.start!, values.end!);
  } catch (error) {
    if (error instanceof ApiError && error.status < 500) return usage(error.message);
    throw error;
  }
  const results: RetryResult[] = [];
  for (const key of keys) {
    try {
      const { body } = await call<{ run: { run_id: string; attempt: number } }>(
        link,
        'POST',
        `/v1/rollups/${encodeURIComponent(id)}/periods/${encodeURIComponent(key)}/retry`,
      );
      results.push({ period: key, run_id: body.run.run_id, attempt: body.run.attempt });
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      if (error.code === 'not_retryable') results.push({ period: key, refused: error.message });
      else if (error.status === 404 || error.status === 400) return usage(error.message);
      else throw error;
    }
  }
  return printRetried(id, results, values);
}

/** The keys of the window's periods whose current run failed, timed out or was lost, oldest first. */
async function retryableKeys(link: DaemonLink, id: string, start: string, end: string): Promise<string[]> {
  const found: Array<{ key: string; at: number }> = [];
  for (const state of RETRYABLE) {
    let cursor: string | null = null;
    do {
      const query = new URLSearchParams({ start, end, run_state: state, limit: '10000' });
      if (cursor !== null) query.set('cursor', cursor);
      const { body } = await call<{
        periods: Array<{ key: string; start: string | number }>;
        next_cursor: string | null;
      }>(link, 'GET', `/v1/rollups/${encodeURIComponent(id)}/periods?${query}`);
      for (const p of body.periods)
        found.push({ key: p.key, at: typeof p.start === 'number' ? p.start : Date.parse(p.start) });
      cursor = body.next_cursor;
    } while (cursor !== null && found.length < MAX_RETRIES);
  }
  return found
    .sort((a, b) => a.at - b.at)
    .slice(0, MAX_RETRIES)
    .map((p) => p.key);
}
