/** A rollup's `repair:`: when to ask producers for the ranges holding a period back, and where. */
import { z } from 'zod';
import { DEFAULT_REPAIR_POLICY } from '../core/repairs/repair.js';
import { isoDuration } from '../support/fields.js';
import { targetSchema, targetType } from '../targets/registry.js';

export const repairSchema = z.strictObject({
  // Unsatisfied this long after its end, a period's ranges are requested (docs/repairs.md).
  after: isoDuration.default(DEFAULT_REPAIR_POLICY.afterMs),
  // Not covered this long after an attempt: the rest is requested again as a new attempt.
  every: isoDuration
    .refine((ms) => ms >= 1000, { message: 'must be at least PT1S' })
    .default(DEFAULT_REPAIR_POLICY.everyMs),
  // Attempts before a request is abandoned.
  attempts: z.number().int().min(1).max(100).default(DEFAULT_REPAIR_POLICY.attempts),
  // At most this many ranges per request; the payload carries the totals.
  limit: z.number().int().min(1).max(1000).default(DEFAULT_REPAIR_POLICY.limit),
  // Any target type, with the request as its payload; each type says what it refuses here (a run
  // to follow, a Dagster partition: neither has a meaning for a request).
  target: targetSchema.superRefine((t, ctx) => {
    for (const problem of targetType(t.type)?.repairProblems?.(t) ?? [])
      ctx.addIssue({ code: 'custom', path: [problem.field], message: problem.message });
  }),
});

export type RepairConfig = z.output<typeof repairSchema>;
