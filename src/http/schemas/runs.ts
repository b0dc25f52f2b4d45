/** Runs: the run on a period, its history, the callback `POST /v1/runs` and the manual retry. */
import { z } from 'zod';
import { RUN_STATES } from '../../core/runs/runs.js';
import { TARGET_REPORT_SOURCES } from '../../targets/registry.js';
import { defineOperation } from '../operation.js';
import { Bound, coded, Timestamp, text } from './common.js';

export const RunState = z.enum(RUN_STATES);

/** A period's current run (its generation's newest attempt), with its documented field names. */
export const RunJson = z.object({
  attempt: z.int().meta({ description: '1 for the trigger itself, then 2, 3, ... for retries' }),
  state: RunState.meta({
    description:
      'pending (not yet delivered), started (the target accepted it), running, succeeded, failed, timed_out (no outcome within run.timeout) or lost (the target no longer knows it)',
  }),
  error: z.string().nullable(),
  started_at: Timestamp.nullable(),
  finished_at: Timestamp.nullable(),
  next_retry_at: Timestamp.nullable().meta({ description: 'when the next attempt is made, if one is owed' }),
  run_id: z.string().meta({ description: 'the id the target sees: the idempotency key, then <key>~aN' }),
  generation: z.int(),
});

/** One report about a run, as recorded (every report is, whatever it changed). */
export const RunReportJson = z.object({
  at: Timestamp,
  source: z.enum(['scheduler', ...TARGET_REPORT_SOURCES, 'callback', 'manual']),
  state: z.string(),
  effect: z.enum(['applied', 'unchanged', 'stale', 'refused']).meta({
    description:
      'applied: the run moved; unchanged: it already was so; stale: an older attempt or generation (its own row only); refused: the run does not move that way (a finished run; any report for a run whose rollup has run.outcome delivery)',
  }),
  error: z.string().nullable(),
  version: z.string().nullable(),
});

/** A run in a period's history: every attempt of every generation, newest first. */
export const RunHistoryJson = RunJson.extend({
  cause: z.enum(['trigger', 'retry', 'manual']),
  version: z.string().nullable(),
  created_at: Timestamp,
  timeout_at: Timestamp.nullable(),
  deliveries: z.int().meta({ description: 'delivery tries so far' }),
  reports: z.array(RunReportJson),
});

const REPORT_STATES = ['running', 'succeeded', 'failed'] as const;

export const RunReportBody = z.strictObject({
  idempotency_key: coded(
    text(1, 400).meta({ description: "the payload's idempotency_key (or its run_id)" }),
    'invalid_idempotency_key',
    "idempotency_key must be the trigger payload's idempotency_key, a non-empty string without U+0000",
  ),
  attempt: coded(
    z.int().min(1).max(1_000_000).meta({ description: "the payload's attempt" }),
    'invalid_attempt',
    "attempt must be the payload's attempt, an integer from 1",
  ),
  state: coded(z.enum(REPORT_STATES), 'invalid_state', `state must be one of ${REPORT_STATES.join(', ')}`),
  error: coded(
    text(0, 4000).nullable().optional(),
    'invalid_error',
    'error must be a string of at most 4000 characters without U+0000, or null',
  ),
  version: coded(
    text(1, 200).nullable().optional().meta({ description: 'the version a successful run produced' }),
    'invalid_version',
    'version must be a non-empty string of at most 200 characters without U+0000, or null',
  ),
});

export const RunReportAnswer = z.object({
  idempotency_key: z.string(),
  attempt: z.int(),
  effect: RunReportJson.shape.effect,
  current: z
    .boolean()
    .meta({ description: "the run is its period's current one (an older attempt or generation is not)" }),
  run: RunJson,
});

export const postRunReport = defineOperation({
  method: 'POST',
  path: '/v1/runs',
  id: 'postRunReport',
  summary: "Report a run's state from the downstream job (any target, webhooks included)",
  description:
    'Idempotent: a repeated report changes nothing. A report for an older attempt or generation is recorded in the run history and changes nothing else; a finished run does not move. A report for a run whose rollup has run.outcome delivery (the default of a webhook target: the run succeeds when the endpoint answers 2xx) is recorded and moves nothing.',
  // The run's rollup must be the token's (checked once the run is found).
  access: 'rollups',
  body: {
    description: 'the run (idempotency_key and attempt from the payload) and its state',
    schema: RunReportBody,
  },
  answers: { 200: { description: 'the report is recorded', schema: RunReportAnswer } },
  errors: {
    400: 'invalid_request, invalid_idempotency_key, invalid_attempt, invalid_state, invalid_error, invalid_version',
    404: 'unknown_run: no trigger has this idempotency key, or it has no such attempt',
  },
});

export const RetryRequested = z.object({
  rollup: z.string(),
  period: z.object({ start: Bound, end: Bound, key: z.string() }),
  run: RunJson,
});

export const retryPeriod = defineOperation({
  method: 'POST',
  path: '/v1/rollups/{id}/periods/{key}/retry',
  id: 'retryPeriod',
  summary: 'Retry the run of one period by hand: a new attempt of its generation',
  description:
    'Only a run that failed, timed out or was lost is retried; the new attempt is delivered at once.',
  access: 'rollups',
  scopedBy: 'id',
  params: z.object({
    id: z.string().meta({ description: 'the rollup id' }),
    key: z.string().meta({ description: 'the period key, as listings give it' }),
  }),
  answers: { 202: { description: 'the new attempt, pending', schema: RetryRequested } },
  errors: {
    404: 'unknown_rollup; unknown_period: the rollup has no period with this key (yet)',
    409: 'not_retryable: the period has no run yet, or its run is open or succeeded',
  },
});
