/** The rollup listings, the period detail and the manual trigger. */
import { z } from 'zod';
import { PERIOD_STATES } from '../../core/periods/policy.js';
import { OUTCOME_SOURCES } from '../../core/runs/outcome.js';
import { COUNTED_RUN_STATES, RUN_STATES } from '../../core/runs/runs.js';
import { defineOperation } from '../operation.js';
import {
  BOUND_TEXT_PATTERN,
  Bound,
  coded,
  nameFilter,
  PeriodState,
  pageCursor,
  pageLimit,
  ReplayRequiredRange,
  Span,
  Timestamp,
} from './common.js';
import { RepairJson } from './repairs.js';
import { RunHistoryJson, RunJson, RunState } from './runs.js';

export const DEFAULT_ROLLUPS = 100;
export const MAX_ROLLUPS = 1000;
export const DEFAULT_PERIODS = 500;
export const MAX_PERIODS = 10_000;

const unknownRollup = 'unknown_rollup: no rollup with this id is configured';

const count = z.int();

/** Periods per state; every state is present. */
export const StateCounts = z.object(
  Object.fromEntries(PERIOD_STATES.map((state) => [state, count])) as Record<
    (typeof PERIOD_STATES)[number],
    typeof count
  >,
);

/** Periods per state of their current run; every state but succeeded (most of history) is present. */
export const RunCounts = z.object(
  Object.fromEntries(COUNTED_RUN_STATES.map((state) => [state, count])) as Record<
    (typeof COUNTED_RUN_STATES)[number],
    typeof count
  >,
);

export const RunPolicyJson = z.object({
  retries: z.int(),
  backoff: z.string().meta({ description: 'ISO 8601 duration before the first retry; doubles per attempt' }),
  timeout: z.string().meta({ description: 'ISO 8601 duration from the start to timed_out' }),
  outcome: z.enum(OUTCOME_SOURCES).meta({
    description:
      'where a run gets its outcome: target (the target is asked; queue, airflow, dagster), delivery (it succeeds when the webhook answers 2xx) or callback (it waits for POST /v1/runs)',
  }),
});

export const RollupListQuery = z.object({
  q: nameFilter("part of the id or of an upstream's name, any case"),
  limit: pageLimit(DEFAULT_ROLLUPS, MAX_ROLLUPS),
  cursor: pageCursor,
});

export const Policy = z.object({
  ratio: z.number().optional(),
  max_missing: z
    .union([z.string(), z.int()])
    .optional()
    .meta({ description: 'an ISO 8601 duration for a time rollup, a count of offsets for an integer one' }),
  settle: z.string(),
  deadline: z.string().optional(),
  on_deadline: z.enum(['trigger', 'miss']),
  catch_up: z.string().optional(),
});

export const RollupSource = z.enum(['file', 'api']).meta({
  description: 'where the rollup is defined: the config file, or the API (PUT /v1/rollups/{id})',
});

export const RollupSummary = z.object({
  id: z.string(),
  source: RollupSource,
  upstream: z.array(z.string()),
  every: z.union([z.string(), z.int()]),
  timezone: z.string(),
  begin: Bound,
  policy: Policy,
  rerun: z.enum(['never', 'on_replay', 'on_update']),
  target: z.object({ type: z.string() }),
  periods: StateCounts.meta({ description: 'every period since begin, stored or derived, by state' }),
  run: RunPolicyJson,
  runs: RunCounts.meta({
    description:
      'periods by the state of their current run, succeeded excepted (failed, timed_out and lost: what needs a look)',
  }),
  last_trigger: z
    .string()
    .nullable()
    .meta({ description: 'the idempotency key of the latest trigger decision; null before the first' }),
  undelivered: z.int().meta({ description: 'trigger decisions not yet delivered to the target' }),
});

export const RollupList = z.object({
  rollups: z.array(RollupSummary),
  total: z.int().meta({ description: 'rollups matching q' }),
  next_cursor: z.string().nullable(),
});

export const listRollups = defineOperation({
  method: 'GET',
  path: '/v1/rollups',
  id: 'listRollups',
  summary: 'The configured rollups in config order, with period counts by state',
  access: 'read',
  query: RollupListQuery,
  answers: { 200: { description: 'one page of rollups', schema: RollupList } },
  errors: { 400: 'invalid_limit, invalid_cursor, invalid_query' },
});

export const RollupParams = z.object({ id: z.string().meta({ description: 'the rollup id' }) });

const once = (name: string) => `${name} must be given at most once`;

export const PeriodListQuery = z.object({
  start: coded(
    z.string().optional().meta({
      description: "periods overlapping [start, end), in the rollup's form",
      pattern: BOUND_TEXT_PATTERN,
    }),
    'invalid_bound',
    once('start'),
  ),
  end: coded(
    z.string().optional().meta({ description: 'exclusive', pattern: BOUND_TEXT_PATTERN }),
    'invalid_bound',
    once('end'),
  ),
  state: coded(PeriodState.optional(), 'invalid_state', `state must be one of ${PERIOD_STATES.join(', ')}`),
  limit: pageLimit(DEFAULT_PERIODS, MAX_PERIODS),
  order: coded(
    z.enum(['asc', 'desc']).optional().meta({
      description: 'default asc for a closed window (start and end), desc (latest first) otherwise',
    }),
    'invalid_order',
    'order must be asc or desc',
  ),
  run_state: coded(
    RunState.optional().meta({ description: 'only periods whose current run is in this state' }),
    'invalid_run_state',
    `run_state must be one of ${RUN_STATES.join(', ')}`,
  ),
  cursor: pageCursor,
  summary: coded(
    z
      .enum(['true', 'false', '1', '0'])
      .optional()
      .meta({ description: 'true or 1 adds the window as runs of equal state' }),
    'invalid_summary',
    'summary must be true, false, 1 or 0',
  ),
});

export const PeriodJson = z.object({
  start: Bound,
  end: Bound,
  key: z.string().meta({ description: "readable, in the rollup's zone: 2025-06-01T10, 2025-W23, ..." }),
  state: PeriodState,
  ratio: z.number().meta({ description: 'the smallest upstream ratio' }),
  ratios: z.record(z.string(), z.number()).meta({ description: 'per upstream' }),
  generation: z.int().meta({ description: '0 before the first trigger' }),
  reason: z.string().nullable(),
  triggered_at: Timestamp.nullable(),
  run: RunJson.nullable().meta({
    description: "the current run (its generation's newest attempt); null before the first trigger",
  }),
});

export const PeriodListing = z.object({
  periods: z.array(PeriodJson),
  counts: StateCounts.meta({ description: 'the whole window, by state' }),
  summary: z
    .array(z.object({ start: Bound, end: Bound, state: PeriodState, count: z.int() }))
    .optional()
    .meta({ description: 'with summary=true: the window as runs of equal state' }),
  next_cursor: z.string().nullable(),
});

export const listPeriods = defineOperation({
  method: 'GET',
  path: '/v1/rollups/{id}/periods',
  id: 'listPeriods',
  summary: "A rollup's periods overlapping a window, stored or derived, a page at a time",
  access: 'read',
  params: RollupParams,
  query: PeriodListQuery,
  answers: { 200: { description: 'one page of periods', schema: PeriodListing } },
  errors: {
    400: 'invalid_bound, out_of_range, end_before_start, invalid_state, invalid_run_state, invalid_limit, invalid_order, invalid_cursor, invalid_summary',
    404: unknownRollup,
  },
});

export const PeriodDetail = z.object({
  rollup: z.string(),
  period: z.object({
    start: Bound,
    end: Bound,
    key: z.string(),
    state: PeriodState,
    stored: z.boolean().meta({ description: 'false for a period nothing has happened to (derived state)' }),
    ratio: z.number(),
    generation: z.int(),
    reason: z.string().nullable(),
    triggered_at: Timestamp.nullable(),
    rerun: z.enum(['replay', 'update']).nullable(),
    manual_requested: z.boolean(),
    run: RunJson.nullable().meta({ description: 'the current run; null before the first trigger' }),
  }),
  upstreams: z.record(
    z.string(),
    z.object({
      seen: z.boolean(),
      ratio: z.number(),
      missing: z.array(Span),
      missing_count: z.int(),
      missing_total: z
        .number()
        .meta({ description: 'how much is missing: seconds for time, values for integers' }),
      replay_required: z.array(ReplayRequiredRange),
      replay_required_count: z.int(),
      versions: z.array(z.string()),
    }),
  ),
  verdict: z.object({
    satisfied: z.enum(['full', 'partial', 'no']),
    outcome: z
      .string()
      .meta({ description: 'what the policy does now: wait (state), trigger (reason) or miss' }),
    due_at: Timestamp.nullable(),
    settle_remaining_seconds: z.number().nullable(),
    deadline_at: Timestamp.nullable(),
  }),
  triggers: z.array(
    z.object({
      generation: z.int(),
      reason: z.string(),
      idempotency_key: z.string(),
      lease_token: z.int(),
      decided_at: Timestamp,
      delivered_at: Timestamp.nullable(),
      failed_at: Timestamp.nullable(),
      attempts: z.int(),
      last_error: z.string().nullable(),
    }),
  ),
  runs: z.array(RunHistoryJson).meta({
    description: 'every attempt of every generation, newest first (at most 100), each with its reports',
  }),
  repairs: z.array(RepairJson).meta({
    description: 'repair requests this period made or waits on, newest first (at most 50)',
  }),
});

export const periodDetail = defineOperation({
  method: 'GET',
  path: '/v1/rollups/{id}/periods/{key}',
  id: 'periodDetail',
  summary: 'Why one period is in its state: upstream coverage, policy verdict, trigger and run history',
  access: 'read',
  params: RollupParams.extend({
    key: z.string().meta({ description: 'the period key, as listings give it' }),
  }),
  answers: { 200: { description: 'the period explained', schema: PeriodDetail } },
  errors: { 404: `${unknownRollup}; unknown_period: the rollup has no period with this key (yet)` },
});

export const TriggerRequested = z.object({
  rollup: z.string(),
  period: z.object({ start: Bound, end: Bound, key: z.string() }),
  requested: z.literal(true),
});

export const triggerPeriod = defineOperation({
  method: 'POST',
  path: '/v1/rollups/{id}/periods/{start}/trigger',
  id: 'triggerPeriod',
  summary: 'Request a manual (re-)trigger of the period with this key, or containing this point',
  access: 'rollups',
  scopedBy: 'id',
  params: RollupParams.extend({
    start: z.string().meta({
      description: "the period key, as listings give it, or a point of the period in the rollup's form",
    }),
  }),
  answers: { 202: { description: 'the trigger is requested', schema: TriggerRequested } },
  errors: {
    400: 'invalid_bound; out_of_range: a period before begin or one that has not begun',
    404: unknownRollup,
    503: 'rollup_not_recorded: the instance holding the lease has not taken this rollup up yet (a moment after start, a reload or a PUT); Retry-After says when to ask again',
  },
});
