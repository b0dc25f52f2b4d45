/**
 * The `webhook` target type: the payload POSTed as JSON with an Idempotency-Key header, the
 * receiver's to dedupe. A webhook cannot be asked how a run went: this is the type with nothing
 * to follow (`follow: null`), its runs end by the downstream job's own report (`POST /v1/runs`) or
 * by `run.timeout`.
 */
import { z } from 'zod';
import { isoDuration, secret, targetUrl } from '../support/fields.js';
import { postJson, resultOfStatus } from './requests.js';
import { type DeliveryResult, defineTarget, type ResolvedConfig, type Target } from './target.js';

const schema = z.strictObject({
  type: z.literal('webhook'),
  url: targetUrl,
  headers: z.record(z.string(), secret).default({}),
  timeout: isoDuration.default(10_000),
});

export const webhookType = defineTarget({
  type: 'webhook',
  docs: 'docs/targets/webhook.md',
  schema,
  secrets: { fields: [['headers', 'secret map']], last: false },
  follow: null,
  trigger: (config) => webhookTarget(config),
  repair: (config) => ({
    // The attempt's key (`repair-<id>~aN`) as the Idempotency-Key.
    deliver: (payload) => post(config, payload, payload.idempotency_key),
    close: async () => {},
  }),
  // Not the URL: its query string may carry a key.
  describe: () => 'webhook',
});

export type WebhookConfig = Omit<ResolvedConfig<typeof schema>, 'type'>;

/** POST the payload as JSON with an Idempotency-Key header: the attempt's run id (the key itself for attempt 1). */
export function webhookTarget(config: WebhookConfig): Target {
  return {
    deliver: (payload) => post(config, payload, payload.run_id ?? payload.idempotency_key),
    close: async () => {},
  };
}

async function post(config: WebhookConfig, payload: unknown, key: string): Promise<DeliveryResult> {
  const headers = { ...config.headers, 'Idempotency-Key': key };
  const response = await postJson(config.url, payload, headers, config.timeout);
  if ('error' in response) return { ok: false, retry: true, error: response.error };
  return resultOfStatus(response.status, response.text);
}
