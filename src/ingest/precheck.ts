import { BadInputError } from '../core/errors.js';
import {
  domainMismatch,
  type NormalizedEvent,
  type NormalizeOptions,
  normalizeEvent,
} from '../core/events.js';
import type { Domain } from '../core/types.js';

export interface Refusal {
  readonly index: number;
  readonly error: BadInputError;
}

/** The domains the index has recorded for some of the named assets. */
export type RecordedDomains = (assets: readonly string[]) => Promise<ReadonlyMap<string, Domain>>;

/**
 * Validates events before they are enqueued (HTTP and `emit`), as the worker will: each on its
 * own, then each one's domain against its asset's recorded domain or, for an asset the index has
 * not seen, against the first event for it in this batch (the worker registers a new asset with
 * the domain of the first event it commits). Refusals come in item order.
 */
export async function precheckEvents(
  items: readonly unknown[],
  options: NormalizeOptions,
  recorded: RecordedDomains,
): Promise<Refusal[]> {
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
  return refusals.sort((a, b) => a.index - b.index);
}
