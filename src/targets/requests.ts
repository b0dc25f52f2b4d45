/**
 * The HTTP requests the HTTP target types make (fetch, bounded in time), how their answers count,
 * and the scrubbing of what they send out of any error text.
 */
import type { DeliveryResult } from './target.js';

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
 * Replaces every occurrence of a secret (4 characters or more: shorter ones would garble the
 * text and protect nothing) in an error that is about to be logged and stored in `last_error`.
 * A server that echoes request headers into its error body must not put them into the database.
 */
export function scrubSecrets(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (s.length >= 4) out = out.split(s).join('[redacted]');
  return out;
}
