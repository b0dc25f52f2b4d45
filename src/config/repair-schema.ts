/** A rollup's `repair:`: when to ask producers for the ranges holding a period back, and where. */
import { z } from 'zod';
import { DEFAULT_REPAIR_POLICY } from '../core/repair.js';
import { isoDuration } from './fields.js';
import { targetSchema } from './targets.js';

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
  // Any target type, with the request as its payload. Following a run and a Dagster
  // partition have no meaning for a request and are refused on the two types new to repairs;
  // airflow's partitioned and the partition key's format and zone were always ignored here.
  target: targetSchema.superRefine((t, ctx) => {
    if (t.type === 'dagster' && t.partition_format !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['partition_format'],
        message: 'a repair request is an observation of the asset, not of one partition: remove it',
      });
    }
    if (t.type === 'airflow_asset' && t.follow_dag_id !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['follow_dag_id'],
        message: 'a repair request is followed by what the index then covers, not by a DAG run: remove it',
      });
    }
  }),
});

export type RepairConfig = z.output<typeof repairSchema>;
