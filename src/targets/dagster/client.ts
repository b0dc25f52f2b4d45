/**
 * A Dagster webserver as both Dagster targets (materializations and repair observations) use it:
 * its GraphQL and its report endpoints, with the configured headers and token.
 */
import { postJson, resultOfStatus, scrubSecrets } from '../requests.js';
import type { DeliveryResult } from '../target.js';

/** How to reach the webserver: its URL, headers and token (resolved), and each request's bound. */
export interface DagsterClientConfig {
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly token?: string | undefined;
  readonly timeout: number;
}

/** The path of a report endpoint: each key part URL-encoded, `/` between them (Dagster splits on it). */
export function reportPath(
  assetKey: readonly string[],
  event: 'materialization' | 'observation' = 'materialization',
): string {
  return `/report_asset_${event}/${assetKey.map(encodeURIComponent).join('/')}`;
}

/**
 * A Dagster webserver as both Dagster targets use it: its GraphQL and its report endpoints, with
 * the configured headers and token, every error scrubbed of them.
 */
export function dagsterClient(config: DagsterClientConfig) {
  const base = config.url.replace(/\/+$/, '');
  const headers: Record<string, string> = {
    // Dagster takes `application/json` exactly (postJson sets it): no header may replace it.
    ...Object.fromEntries(
      Object.entries(config.headers).filter(([name]) => name.toLowerCase() !== 'content-type'),
    ),
    ...(config.token !== undefined ? { 'Dagster-Cloud-Api-Token': config.token } : {}),
  };
  const secrets = [...Object.values(config.headers), ...(config.token !== undefined ? [config.token] : [])];
  const scrub = (text: string) => scrubSecrets(text, secrets);
  return {
    /** A GraphQL request's `data`, or an error (HTTP, not JSON, or GraphQL's own `errors`). */
    async graphql<T>(request: unknown): Promise<{ data: T } | { error: string }> {
      const response = await postJson(`${base}/graphql`, request, headers, config.timeout);
      if ('error' in response) return { error: scrub(response.error) };
      if (response.status !== 200)
        return { error: scrub(`GraphQL HTTP ${response.status}: ${response.text.slice(0, 300)}`) };
      let answer: { data?: T; errors?: Array<{ message?: string }> };
      try {
        answer = JSON.parse(response.text) as typeof answer;
      } catch {
        return { error: 'the GraphQL answer is not JSON' };
      }
      if (answer.errors?.length)
        return {
          error: scrub(
            `GraphQL: ${answer.errors
              .map((e) => e.message)
              .join('; ')
              .slice(0, 300)}`,
          ),
        };
      return { data: answer.data ?? ({} as T) };
    },
    /** POSTs a report (`/report_asset_materialization/...`, `/report_asset_observation/...`). */
    async report(path: string, body: unknown): Promise<DeliveryResult> {
      // Exactly `application/json`: Dagster refuses any other content type, charset included.
      const response = await postJson(`${base}${path}`, body, headers, config.timeout);
      if ('error' in response) return { ok: false, retry: true, error: scrub(response.error) };
      const result = resultOfStatus(response.status, response.text);
      return result.ok ? result : { ...result, error: scrub(result.error) };
    },
  };
}
