/**
 * A command's requests to a daemon's API: JSON in and out over node:http (fetch would load undici,
 * about 150 ms of a command's start), the bearer token of its link, and errors that say which
 * daemon did not answer and how it was found.
 */
import type { IncomingMessage } from 'node:http';
import type { DaemonLink } from './daemon-link.js';

export interface Answer<T = unknown> {
  readonly status: number;
  readonly body: T;
}

/** The daemon did not answer (refused, timed out) or answered something that is not the API. */
export class DaemonUnreachableError extends Error {
  override readonly name = 'DaemonUnreachableError';
}

/** An answer of 400 or more: `{code, message}` as every API error is. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly body: Record<string, unknown>,
  ) {
    super(message);
  }
}

const TIMEOUT_MS = 30_000;

/** One request; resolves with any 2xx answer, rejects with ApiError for 4xx/5xx. */
export async function call<T>(
  link: DaemonLink,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
): Promise<Answer<T>> {
  const url = new URL(`${link.url}${path}`);
  const { request } = url.protocol === 'https:' ? await import('node:https') : await import('node:http');
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const headers: Record<string, string> = { accept: 'application/json' };
  if (payload !== undefined) headers['content-type'] = 'application/json';
  if (link.token !== undefined) headers.authorization = `Bearer ${link.token}`;
  const response = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request(url, { method, headers, timeout: TIMEOUT_MS }, (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${TIMEOUT_MS / 1000} s`)));
    req.on('error', (error) => reject(unreachable(link, error)));
    req.end(payload);
  });
  let parsed: unknown;
  try {
    parsed = JSON.parse(response.text);
  } catch {
    throw new DaemonUnreachableError(
      `${link.url} answered ${method} ${path} with HTTP ${response.status} and no JSON: is it a coverage-rollup daemon?`,
    );
  }
  if (response.status >= 400) {
    const error = (parsed ?? {}) as Record<string, unknown>;
    throw new ApiError(
      response.status,
      String(error.code ?? 'error'),
      String(error.message ?? `HTTP ${response.status}`),
      error,
    );
  }
  return { status: response.status, body: parsed as T };
}

function unreachable(link: DaemonLink, error: Error & { code?: string }): DaemonUnreachableError {
  const why = error.code ?? error.message;
  const recorded =
    link.record === undefined
      ? ''
      : `; it is recorded in ${link.from} (pid ${link.record.pid}): is it still starting, or stopped without removing its record?`;
  return new DaemonUnreachableError(`no daemon answers at ${link.url} (${why})${recorded}`);
}

/** The message a command prints for an API error: the daemon's own words, and a hint for tokens. */
export function apiErrorText(error: ApiError, link: DaemonLink): string {
  if (error.status === 401 || error.status === 403) {
    const hint =
      link.token === undefined
        ? "; export COVERAGE_ROLLUP_TOKEN=<one of the daemon's api_tokens>"
        : link.from === '--url' && link.record === undefined
          ? ' (the token is COVERAGE_ROLLUP_TOKEN)'
          : '';
    return `${error.message}${hint}`;
  }
  return error.message;
}
