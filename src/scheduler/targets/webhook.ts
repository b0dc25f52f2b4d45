import type { TriggerPayload } from '../../core/trigger.js';
import type { ResolvedTarget } from './secrets.js';
import { type DeliveryResult, postJson, resultOfStatus, type Target } from './target.js';

export type WebhookConfig = Omit<Extract<ResolvedTarget, { type: 'webhook' }>, 'type'>;

/** POST the payload as JSON with an Idempotency-Key header. */
export function webhookTarget(config: WebhookConfig): Target {
  return {
    async deliver(payload: TriggerPayload): Promise<DeliveryResult> {
      const headers = { ...config.headers, 'Idempotency-Key': payload.idempotency_key };
      const response = await postJson(config.url, payload, headers, config.timeout);
      if ('error' in response) return { ok: false, retry: true, error: response.error };
      return resultOfStatus(response.status, response.text);
    },
    close: async () => {},
  };
}
