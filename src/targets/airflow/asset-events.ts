/**
 * One Airflow asset's events, as the `airflow_asset` trigger target and the repair target both use
 * them: the asset's id (looked up once by name or URI), an event found again by what its `extra`
 * carries, and an event posted only when that look-up finds none, so a redelivery never adds a
 * second one (a first delivery, which has nothing to find, posts at once).
 */

import { resultOfStatus } from '../requests.js';
import type { DeliveryResult } from '../target.js';
import { type AirflowApi, airflowApi } from './api.js';
import type { AirflowAuthConfig } from './token.js';

/** The asset, by name or by URI (one of them), and how to reach Airflow. */
export interface AssetEventsConfig extends AirflowAuthConfig {
  readonly asset?: string | undefined;
  readonly asset_uri?: string | undefined;
}
// biome-ignore lint/suspicious/noExplicitAny: Airflow's answers are read as untyped JSON
export type Json = Record<string, any>;

/** Pages of asset events read at most when looking an event up. */
const LOOKUP_PAGES = 5;
const PAGE = 100;

/** An event to send once: its `extra`, what marks an event as this one, and when it was made. */
export interface AssetEventSpec {
  readonly extra: Json;
  readonly partitionKey?: string;
  /** Whether an event's `extra` is this one's (an earlier delivery of it). */
  readonly isOurs: (extra: Json | undefined) => boolean;
  /** When the event was decided: Airflow is searched from a second before it. */
  readonly since: string;
  /** No earlier delivery of it was ever begun (DeliveryContext): post without looking first. */
  readonly first?: boolean;
}

export interface AirflowAssetEvents {
  /** Names the asset in messages: `asset NAME` or `asset URI URI`. */
  readonly what: string;
  /** The asset's id, or the result to record when it cannot be had. `used` collects secrets sent. */
  resolve(used: string[]): Promise<number | DeliveryResult>;
  /** The asset's event that `isOurs`, among those since `since`, newest first. */
  find(
    id: number,
    isOurs: AssetEventSpec['isOurs'],
    since: string,
    used: string[],
  ): Promise<{ event: Json | undefined } | { error: string }>;
  /** Posts the event unless an earlier delivery already did. */
  sendOnce(spec: AssetEventSpec, used: string[]): Promise<DeliveryResult>;
  /** An authenticated GET of a path under the API (`/api/v2/...`). */
  get: AirflowApi['get'];
}

export function airflowAssetEvents(
  config: AssetEventsConfig,
  now: () => number = Date.now,
): AirflowAssetEvents {
  const api = airflowApi(config, now);
  let assetId: number | undefined;
  const what = config.asset !== undefined ? `asset ${config.asset}` : `asset URI ${config.asset_uri}`;
  const { get } = api;

  /** By exact name or URI (`GET /api/v2/assets?name_pattern=`), cached once found. */
  async function resolve(used: string[]): Promise<number | DeliveryResult> {
    if (assetId !== undefined) return assetId;
    const [param, wanted, field] =
      config.asset !== undefined
        ? ['name_pattern', config.asset, 'name']
        : ['uri_pattern', config.asset_uri!, 'uri'];
    const response = await get(`/api/v2/assets?${param}=${encodeURIComponent(wanted)}&limit=${PAGE}`, used);
    if ('error' in response) return { ok: false, retry: true, error: response.error };
    if (response.status !== 200) return resultOfStatus(response.status, response.text);
    const assets = (parse(response.text)?.assets ?? []) as Json[];
    const found = assets.find((a) => a[field] === wanted);
    // Not there yet (no DAG parsed declares it): retried until one does.
    if (!found) return { ok: false, retry: true, error: `Airflow has no ${what} (yet)` };
    assetId = Number(found.id);
    return assetId;
  }

  async function find(
    id: number,
    isOurs: AssetEventSpec['isOurs'],
    since: string,
    used: string[],
  ): Promise<{ event: Json | undefined } | { error: string }> {
    const from = new Date(Date.parse(since) - 1_000).toISOString();
    let offset = 0;
    for (let page = 0; page < LOOKUP_PAGES; page++) {
      const query = new URLSearchParams({
        asset_id: String(id),
        timestamp_gte: from,
        order_by: '-timestamp',
        limit: String(PAGE),
        offset: String(offset),
      });
      const response = await get(`/api/v2/assets/events?${query}`, used);
      if ('error' in response) return response;
      if (response.status !== 200)
        return { error: `GET asset events: HTTP ${response.status}: ${response.text.slice(0, 300)}` };
      const answer = parse(response.text);
      const events = (answer?.asset_events ?? []) as Json[];
      const event = events.find((e) => isOurs(e.extra));
      if (event) return { event };
      // A page cut short by [api] maximum_page_limit is not the end: total_entries is.
      offset += events.length;
      if (events.length === 0 || offset >= Number(answer?.total_entries ?? 0)) return { event: undefined };
    }
    return {
      error: `more than ${LOOKUP_PAGES * PAGE} events of ${what} since ${since}: cannot tell whether it was sent`,
    };
  }

  async function sendOnce(spec: AssetEventSpec, used: string[]): Promise<DeliveryResult> {
    const id = await resolve(used);
    if (typeof id !== 'number') return id;
    // Airflow keeps no key of ours on an event, so a redelivery looks for its event first; a
    // first delivery has none to find, and that request would only delay the run.
    if (spec.first !== true) {
      const existing = await find(id, spec.isOurs, spec.since, used);
      if ('error' in existing) return { ok: false, retry: true, error: existing.error };
      if (existing.event) return { ok: true };
    }
    const body = {
      asset_id: id,
      ...(spec.partitionKey === undefined ? {} : { partition_key: spec.partitionKey }),
      extra: spec.extra,
    };
    const response = await api.post('/api/v2/assets/events', body, used);
    if ('error' in response) return { ok: false, retry: true, error: response.error };
    return resultOfStatus(response.status, response.text);
  }

  return { what, resolve, find, sendOnce, get };
}

export function parse(text: string): Json | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' ? (value as Json) : undefined;
  } catch {
    return undefined;
  }
}
