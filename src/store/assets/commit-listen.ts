import type { Sql } from '../pg/db.js';
import { EVENTS_CHANNEL } from './commit.js';

export interface CommitHandlers {
  /** A commit with new events of these assets, or of any (a payload that names none). */
  readonly onCommit: (assets: readonly string[] | 'any') => void;
  /** The listening connection is (re)established: notifications may have been missed before it. */
  readonly onConnect: () => void;
}

/**
 * Listens for the notification every commit into the index sends (commit.ts `EVENTS_CHANNEL`),
 * on a connection of its own that postgres.js re-establishes after a loss. Resolves once
 * listening, with the function that stops it.
 */
export async function listenForCommits(sql: Sql, handlers: CommitHandlers): Promise<() => Promise<void>> {
  const listener = await sql.listen(
    EVENTS_CHANNEL,
    (payload) => handlers.onCommit(committedAssets(payload)),
    handlers.onConnect,
  );
  return () => listener.unlisten();
}

/** The asset names of a notification's payload; 'any' for '' (too many names, or a manual wake-up). */
export function committedAssets(payload: string): readonly string[] | 'any' {
  let assets: unknown;
  try {
    assets = JSON.parse(payload);
  } catch {
    return 'any';
  }
  if (!Array.isArray(assets) || !assets.every((a) => typeof a === 'string')) return 'any';
  return assets as string[];
}
