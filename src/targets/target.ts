import type { RunReport } from '../core/runs.js';
import type { RunIdentity, TriggerPayload } from '../core/trigger.js';

export type DeliveryResult =
  | { readonly ok: true }
  /** retry: a transient failure (5xx, network, timeout, credentials); otherwise give up and record it. */
  | { readonly ok: false; readonly retry: boolean; readonly error: string };

/** A delivered run the scheduler asks its target about: its payload names its ids (not its coverage). */
export interface ObservedRun {
  readonly runId: string;
  readonly payload: RunIdentity;
}

/**
 * What a target says about runs, by run id: a report (`lost` when it no longer knows the run), or
 * null when it says nothing new (not started yet, or not in this answer).
 */
export type Observation = ReadonlyMap<string, RunReport | null>;

export interface Target {
  deliver(payload: TriggerPayload): Promise<DeliveryResult>;
  /** Asks about up to 100 runs in a bounded number of requests; absent for targets that report (webhook). */
  observe?(runs: readonly ObservedRun[]): Promise<Observation | { readonly error: string }>;
  close(): Promise<void>;
}

/**
 * 2xx delivered; 408, 429 and 5xx worth retrying, and so are 401 and 403: refused credentials
 * are fixed in the config or on the target, and the decision must still be delivered then. Any
 * other status is final.
 */
export function resultOfStatus(status: number, body: string): DeliveryResult {
  if (status >= 200 && status < 300) return { ok: true };
  const error = `HTTP ${status}: ${body.slice(0, 300)}`;
  const retry = status >= 500 || [401, 403, 408, 429].includes(status);
  return { ok: false, retry, error };
}

export function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string>,
  timeoutMs: number,
): Promise<{ status: number; text: string } | { error: string }> {
  return request(url, timeoutMs, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

export function getJson(
  url: string,
  headers: Record<string, string>,
  timeoutMs: number,
): Promise<{ status: number; text: string } | { error: string }> {
  return request(url, timeoutMs, { method: 'GET', headers: { accept: 'application/json', ...headers } });
}

async function request(
  url: string,
  timeoutMs: number,
  init: RequestInit,
): Promise<{ status: number; text: string } | { error: string }> {
  try {
    const response = await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
    return { status: response.status, text: await response.text() };
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code;
    return { error: `${(error as Error).name}: ${(error as Error).message}${cause ? ` (${cause})` : ''}` };
  }
}

/**
 * `work`'s answer, or a rejection with `message` after `timeoutMs`: a Redis cut off without a reset
 * never answers (ioredis waits with no deadline), and the scheduler must not wait with it. `work`
 * may still settle later; that is harmless.
 */
export async function withinTime<T>(work: Promise<T>, timeoutMs: number, message: string): Promise<T> {
  work.catch(() => {});
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), timeoutMs);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The target for `config` from `cache`, built once; or why it cannot be built (BullMQ refuses a
 * queue name with `:` when the queue is made). That fails the deliveries to it alone, with the
 * reason, where a throw would fail every scheduler pass, and keep failing them while the stored
 * decision or request stays. Shared by trigger and repair targets.
 */
export function cachedTarget<T>(
  cache: Map<string, T>,
  config: { readonly type: string },
  build: () => T,
): T | { unusable: string } {
  const key = JSON.stringify(config);
  let target = cache.get(key);
  if (target === undefined) {
    try {
      target = build();
    } catch (error) {
      return { unusable: `this ${config.type} target cannot be used: ${(error as Error).message}` };
    }
    cache.set(key, target);
  }
  return target;
}
