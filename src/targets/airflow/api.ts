/**
 * One target's authorised requests to Airflow's REST API: paths under the configured URL (its
 * trailing slashes trimmed), the target's credentials (token.ts: a static token, or a JWT renewed
 * once more on a 401) and its timeout on every request. Every JWT sent is pushed to `used`, so
 * errors can be scrubbed of it.
 */

import { getJson, postJson } from '../requests.js';
import { type AirflowAuthConfig, airflowAuth } from './token.js';

export interface AirflowApi {
  /** An authorised GET of a path under the URL (`/api/v2/...`). */
  get(path: string, used: string[]): ReturnType<typeof getJson>;
  /** An authorised POST of `body` as JSON to a path under the URL, with `headers` besides the auth. */
  post(
    path: string,
    body: unknown,
    used: string[],
    headers?: Record<string, string>,
  ): ReturnType<typeof postJson>;
}

export function airflowApi(config: AirflowAuthConfig, now: () => number): AirflowApi {
  const base = config.url.replace(/\/+$/, '');
  const authorized = airflowAuth(config, now);
  return {
    get: (path, used) => authorized(used, (auth) => getJson(`${base}${path}`, auth, config.timeout)),
    post: (path, body, used, headers = {}) =>
      authorized(used, (auth) => postJson(`${base}${path}`, body, { ...auth, ...headers }, config.timeout)),
  };
}
