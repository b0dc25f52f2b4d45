import type { Config } from '../config/index.js';
import { BadInputError } from '../core/errors.js';
import {
  domainMismatch,
  type NormalizedEvent,
  type NormalizeOptions,
  normalizeEvent,
} from '../core/events/events.js';
import type { Rollup } from '../core/rollups/rollup.js';
import type { Domain } from '../core/types.js';

/**
 * How the config shapes normalisation: the payload limit and each declared asset's domain and
 * zone; and, given the rollups now (read at each event: the catalog changes while the daemon
 * runs), the bound on the periods of each rollup one event may touch.
 */
export function normalizeOptions(
  config: Config,
  rollups?: () => readonly { readonly rollup: Rollup }[],
): NormalizeOptions {
  return {
    maxPayloadBytes: config.queue.max_payload_bytes,
    assets: new Map(config.assets.map((a) => [a.name, { domain: a.domain, zone: a.zone }])),
    ...(rollups ? { readersOf: readersOf(rollups) } : {}),
  };
}

/**
 * The rollups reading each asset, from the rollups now: indexed once per catalog version (a
 * catalog is never changed, only replaced), not filtered again for every event.
 */
export function readersOf(
  rollups: () => readonly { readonly rollup: Rollup }[],
): (asset: string) => readonly Rollup[] {
  let indexed: readonly unknown[] | undefined;
  let byAsset = new Map<string, Rollup[]>();
  return (asset) => {
    const now = rollups();
    if (now !== indexed) {
      byAsset = new Map();
      for (const { rollup } of now)
        for (const name of new Set(rollup.upstream))
          byAsset.set(name, [...(byAsset.get(name) ?? []), rollup]);
      indexed = now;
    }
    return byAsset.get(asset) ?? [];
  };
}

export interface Refusal {
  readonly index: number;
  readonly error: BadInputError;
}

/** The domains the index has recorded for some of the named assets. */
export type RecordedDomains = (assets: readonly string[]) => Promise<ReadonlyMap<string, Domain>>;

/**
 * `recorded` remembering what it answered: an asset keeps the domain it was first recorded with
 * (assets are never deleted nor retyped), so only assets never seen recorded are asked for again.
 * Saves a round trip to PostgreSQL per request of known assets. Holds at most `max` names; a full
 * memo starts over.
 */
export function rememberDomains(recorded: RecordedDomains, max = 10_000): RecordedDomains {
  const known = new Map<string, Domain>();
  return async (assets) => {
    const unknown = assets.filter((a) => !known.has(a));
    if (unknown.length > 0) {
      const found = await recorded(unknown);
      if (known.size + found.size > max) known.clear();
      for (const [name, domain] of found) known.set(name, domain);
    }
    const answer = new Map<string, Domain>();
    for (const a of assets) {
      const domain = known.get(a);
      if (domain !== undefined) answer.set(a, domain);
    }
    return answer;
  };
}

export interface Checked {
  /** Every item normalised, in item order; empty when any was refused (all or none go on). */
  readonly events: readonly NormalizedEvent[];
  /** In item order; empty when every item is valid. */
  readonly refusals: readonly Refusal[];
}

/**
 * Validates events as the worker will, before they are enqueued (HTTP and `emit`) or committed
 * without the queue (./direct.ts): each on its own, then each one's domain against its asset's
 * recorded domain or, for an asset the index has not seen, against the first event for it in
 * this batch (the commit registers a new asset with the domain of the first event it commits).
 */
export async function checkEvents(
  items: readonly unknown[],
  options: NormalizeOptions,
  recorded: RecordedDomains,
): Promise<Checked> {
  const refusals: Refusal[] = [];
  const valid: Array<{ index: number; event: NormalizedEvent }> = [];
  items.forEach((item, index) => {
    try {
      valid.push({ index, event: normalizeEvent(item, options) });
    } catch (error) {
      if (!(error instanceof BadInputError)) throw error;
      refusals.push({ index, error });
    }
  });
  const domainOf = new Map(
    valid.length > 0 ? await recorded([...new Set(valid.map((v) => v.event.asset))]) : [],
  );
  for (const { index, event } of valid) {
    const domain = domainOf.get(event.asset);
    if (domain === undefined) domainOf.set(event.asset, event.domain);
    else if (domain !== event.domain) {
      refusals.push({ index, error: domainMismatch(event, domain) });
    }
  }
  refusals.sort((a, b) => a.index - b.index);
  return { events: refusals.length === 0 ? valid.map((v) => v.event) : [], refusals };
}

/** checkEvents' refusals alone: for producers that enqueue the items as they were sent. */
export async function precheckEvents(
  items: readonly unknown[],
  options: NormalizeOptions,
  recorded: RecordedDomains,
): Promise<Refusal[]> {
  return [...(await checkEvents(items, options, recorded)).refusals];
}
