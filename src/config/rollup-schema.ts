import { z } from 'zod';
import { parseIntegerBound, parseTimeBound } from '../core/intervals/bounds.js';
import { parseEvery } from '../core/periods/calendar/every.js';
import { OUTCOME_SOURCES } from '../core/runs/outcome.js';
import { isoDuration, nonEmpty, zone } from '../support/fields.js';
import { targetSchema, targetType } from '../targets/registry.js';
import { repairSchema } from './repair-schema.js';

/** One entry of `rollups:`: its period grid, wait policy, runs and target. */

const policySchema = z
  .strictObject({
    ratio: z.number().gt(0).lte(1).optional(),
    max_missing: z.union([isoDuration, z.number().int().nonnegative()]).optional(),
    settle: isoDuration.default(0),
    deadline: isoDuration.optional(),
    on_deadline: z.enum(['trigger', 'miss']).optional(),
    catch_up: isoDuration.optional(),
  })
  .refine((p) => p.on_deadline === undefined || p.deadline !== undefined, {
    path: ['on_deadline'],
    message: 'on_deadline needs a deadline (e.g. deadline: PT6H)',
  })
  .refine((p) => p.catch_up === undefined || p.deadline !== undefined, {
    path: ['catch_up'],
    message: 'catch_up bounds deadline triggers: it needs a deadline (e.g. deadline: PT6H)',
  })
  .transform((p) => ({ ...p, on_deadline: p.on_deadline ?? ('trigger' as const) }));

/** What happens after a trigger; docs/rollups.md "Runs" documents the defaults. */
const runSchema = z.strictObject({
  // Automatic retries of a run that failed, timed out or was lost: attempts 1 .. retries + 1.
  retries: z.number().int().min(0).max(100).default(2),
  // The wait before the first retry; it doubles for each later one (PT1M, PT2M, PT4M, ...).
  backoff: isoDuration.default(60_000),
  // No outcome this long after the target accepted the run: timed_out (then retried as above).
  timeout: isoDuration
    .refine((ms) => ms >= 1000, { message: 'must be at least PT1S' })
    .default(6 * 3_600_000),
  // Where the outcome comes from: delivery or callback for a webhook, target for the others. Left
  // out unless written (the stored definition, and so its hash, is what the user wrote); its
  // default and what each target takes are core/runs/outcome.ts's, checked by defineRollups.
  outcome: z.enum(OUTCOME_SOURCES).optional(),
});

export const rollupSchema = z
  .strictObject({
    id: z
      .string()
      .regex(
        /^[A-Za-z0-9_.-]{1,100}$/,
        'expected 1-100 letters, digits, "_", "." or "-" (it becomes part of job ids)',
      ),
    upstream: z.union([nonEmpty, z.array(nonEmpty).min(1)]).transform((u) => (Array.isArray(u) ? u : [u])),
    // Checked here, field by field, so a bad value is reported beside every other error of the file;
    // what needs several fields (begin in the rollup's domain and zone) is checked by defineRollups.
    every: z
      .union([nonEmpty, z.number().int().positive()], {
        error: (issue) =>
          issue.input === undefined
            ? 'required: hour, day, week, month, quarter, year, minute, an ISO duration (PT15M) or an integer bucket size'
            : undefined,
      })
      .superRefine((every, ctx) => {
        try {
          parseEvery(every);
        } catch (error) {
          ctx.addIssue({ code: 'custom', message: (error as Error).message.replace(/^every: /, '') });
        }
      }),
    timezone: zone.default('UTC'),
    begin: z
      .union([nonEmpty, z.number().int(), z.date()])
      .transform((b) => (b instanceof Date ? b.toISOString() : b))
      .superRefine((begin, ctx) => {
        if (!isBound(begin))
          ctx.addIssue({ code: 'custom', message: 'expected a date or date-time (ISO 8601) or an integer' });
      }),
    origin: z.union([nonEmpty, z.number().int()]).optional(),
    policy: policySchema.default(policySchema.parse({})),
    rerun: z.enum(['never', 'on_replay', 'on_update']).default('on_replay'),
    run: runSchema.default({ retries: 2, backoff: 60_000, timeout: 6 * 3_600_000 }),
    target: targetSchema,
    // The asset a succeeded run covers over its period, so other rollups can chain on it.
    output: nonEmpty.optional(),
    // Ask producers for the ranges that hold a period back; off without it.
    repair: repairSchema.optional(),
  })
  // Defaults a target takes from its rollup (an airflow_asset partition key's zone).
  .transform((r) => {
    const defaults = targetType(r.target.type)?.withRollupDefaults;
    return defaults ? { ...r, target: defaults(r.target, r) as typeof r.target } : r;
  });

/** Whether a `begin` or `origin` reads as an instant or an integer, whatever the rollup's domain and zone. */
function isBound(value: string | number): boolean {
  for (const parse of [
    () => parseIntegerBound(value, 'begin'),
    () => parseTimeBound(String(value), 'begin', 'UTC'),
  ]) {
    try {
      parse();
      return true;
    } catch {
      // the other form, then
    }
  }
  return false;
}
