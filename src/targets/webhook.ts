import type { TriggerPayload } from '../core/trigger.js';
import type { ResolvedTarget } from './secrets.js';
import { type DeliveryResult, postJson, resultOfStatus, type Target } from './target.js';

export type WebhookConfig = Omit<Extract<ResolvedTarget, { type: 'webhook' }>, 'type'>;

/** POST the payload as JSON with an Idempotency-Key header: the attempt's run id (the key itself for attempt 1). */
export function webhookTarget(config: WebhookConfig): Target {
  return {
    async deliver(payload: TriggerPayload): Promise<DeliveryResult> {
      const headers = { ...config.headers, 'Idempotency-Key': payload.run_id ?? payload.idempotency_key };
      const response = await postJson(config.url, payload, headers, config.timeout);
      if ('error' in response) return { ok: false, retry: true, error: response.error };
      return resultOfStatus(response.status, response.text);
    },
    close: async () => {},
  };
}
