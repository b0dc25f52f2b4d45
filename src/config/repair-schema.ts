/** A rollup's `repair:` (SPEC §15): when to ask producers for the ranges holding a period back, and where. */
import { z } from 'zod';
import { DEFAULT_REPAIR_POLICY } from '../core/repair.js';
import { isoDuration } from './fields.js';
import { targetSchema } from './targets.js';

/** The target types a repair request can be sent to (its payload is not a trigger's). */
export const REPAIR_TARGET_TYPES = ['queue', 'webhook', 'airflow'] as const;

export const repairSchema = z.strictObject({
  // Unsatisfied this long after its end, a period's ranges are requested (README "Repair requests").
  after: isoDuration.default(DEFAULT_REPAIR_POLICY.afterMs),
  // Not covered this long after an attempt: the rest is requested again as a new attempt.
  every: isoDuration
    .refine((ms) => ms >= 1000, { message: 'must be at least PT1S' })
    .default(DEFAULT_REPAIR_POLICY.everyMs),
  // Attempts before a request is abandoned.
  attempts: z.number().int().min(1).max(100).default(DEFAULT_REPAIR_POLICY.attempts),
  // At most this many ranges per request; the payload carries the totals.
  limit: z.number().int().min(1).max(1000).default(DEFAULT_REPAIR_POLICY.limit),
  target: targetSchema.superRefine((t, ctx) => {
    if (!(REPAIR_TARGET_TYPES as readonly string[]).includes(t.type)) {
      ctx.addIssue({
        code: 'custom',
        path: ['type'],
        message: `a repair request can be sent to ${REPAIR_TARGET_TYPES.join(', ')}; not to ${t.type}`,
      });
    }
  }),
});

export type RepairConfig = z.output<typeof repairSchema>;
