/** Repair requests: `GET /v1/repairs`, `POST /v1/repairs` and the requests in the period detail. */
import { z } from 'zod';
import { REPAIR_STATES } from '../../core/repairs/repair.js';
import { TARGET_NAMES } from '../../targets/registry.js';
import { defineOperation } from '../operation.js';
import { Bound, coded, pageCursor, pageLimit, Timestamp } from './common.js';

export const RepairState = z.enum(REPAIR_STATES);

export const RepairRangeJson = z.object({
  start: Bound,
  end: Bound,
  kind: z.enum(['missing', 'replay_required']),
  required_version: z
    .string()
    .nullable()
    .meta({ description: 'the version to rebuild at (replay_required)' }),
});

export const RepairJson = z.object({
  id: z.int(),
  asset: z.string(),
  state: RepairState.meta({
    description:
      'open, partial (some of it covered; the rest requested again), repaired (the index covers every range), abandoned (after its attempts) or cancelled (its periods were decided otherwise)',
  }),
  ranges: z.array(RepairRangeJson).meta({ description: 'what its current attempt asked for, oldest first' }),
  ranges_total: z.int().meta({ description: 'ranges owed when it was made, before the limit' }),
  missing_total: z
    .number()
    .meta({ description: 'how much they measured: seconds for time, values for integers' }),
  rollup: z
    .string()
    .nullable()
    .meta({ description: 'the rollup whose period made it; null when made by hand' }),
  period: z.object({ start: Bound, end: Bound, key: z.string() }).nullable(),
  waiting: z
    .array(z.object({ rollup: z.string(), period: z.string() }))
    .meta({ description: 'the periods waiting on it (any rollup over the same range)' }),
  attempt: z.int(),
  attempts: z.int().meta({ description: 'attempts before it is abandoned' }),
  idempotency_key: z.string().meta({ description: "the current attempt's key: repair-<id>~a<attempt>" }),
  target: z.string().meta({ description: 'the target type it is sent to' }),
  requested_at: Timestamp,
  next_at: Timestamp.nullable().meta({
    description: 'while open or partial: when the next attempt (or the abandonment) is due',
  }),
  finished_at: Timestamp.nullable(),
  delivery: z
    .object({ delivered_at: Timestamp.nullable(), deliveries: z.int(), error: z.string().nullable() })
    .nullable()
    .meta({ description: "the current attempt's delivery" }),
});

export const DEFAULT_REPAIRS = 100;
export const MAX_REPAIRS = 1000;

export const RepairListQuery = z.object({
  state: coded(
    RepairState.optional().meta({ description: 'only requests in this state' }),
    'invalid_state',
    `state must be one of ${REPAIR_STATES.join(', ')}`,
  ),
  asset: coded(
    z.string().optional().meta({ description: 'only requests for this asset' }),
    'invalid_asset',
    'asset must be given at most once',
  ),
  limit: pageLimit(DEFAULT_REPAIRS, MAX_REPAIRS),
  cursor: pageCursor,
});

export const RepairList = z.object({
  repairs: z.array(RepairJson).meta({ description: 'newest first' }),
  counts: z
    .object(
      Object.fromEntries(REPAIR_STATES.map((s) => [s, z.int()])) as Record<
        (typeof REPAIR_STATES)[number],
        z.ZodInt
      >,
    )
    .meta({ description: 'requests per state (of the asset, when given), on every page' }),
  next_cursor: z.string().nullable().meta({ description: 'null on the last page' }),
});

export const listRepairs = defineOperation({
  method: 'GET',
  path: '/v1/repairs',
  id: 'listRepairs',
  summary: 'Repair requests, newest first, by state and asset, a page at a time',
  access: 'read',
  query: RepairListQuery,
  answers: { 200: { description: 'one page of repair requests', schema: RepairList } },
  errors: { 400: 'invalid_state, invalid_asset, invalid_limit, invalid_cursor' },
});

export const RepairBody = coded(
  z.strictObject({
    asset: z
      .string()
      .min(1)
      .meta({ description: 'the asset: seen by the index, declared, or read or written by a rollup' }),
    start: z.union([z.string(), z.int()]).meta({ description: "the window's start, in the asset's form" }),
    end: z.union([z.string(), z.int()]).meta({ description: 'exclusive' }),
    target: z
      .looseObject({ type: z.enum(TARGET_NAMES) })
      .optional()
      .meta({
        description:
          'where to send it, as a target is written in the config (secrets only as {env: NAME}); default: the repair target of a rollup reading the asset, else of any rollup',
      }),
  }),
  'invalid_payload',
  'send {asset, start, end} and optionally target',
);

export const RepairRequested = z.object({
  asset: z.string(),
  requested: z
    .object({
      id: z.int(),
      idempotency_key: z.string(),
      ranges: z.array(RepairRangeJson),
      ranges_total: z.int(),
      sent_to: z
        .string()
        .meta({ description: 'the target, as an operator finds it: queue backfills, airflow DAG d, ...' }),
    })
    .nullable()
    .meta({
      description: 'null when nothing was requested: the window is covered, or every range already is',
    }),
  open: z
    .array(z.int())
    .optional()
    .meta({ description: 'the open requests that already ask for every range' }),
  covered: z.literal(true).optional().meta({ description: 'the window is covered: nothing to request' }),
  cut_at: Bound.optional().meta({
    description: 'the end the window was cut at: now (data after now cannot exist yet)',
  }),
});

export const postRepair = defineOperation({
  method: 'POST',
  path: '/v1/repairs',
  id: 'postRepair',
  summary: 'Request a repair by hand: the not-complete ranges of a window no open request asks for',
  description:
    "No rollup needed. Stored like the scheduler's requests; the lease holder delivers it as attempt 1, re-sends what is still missing and marks it repaired once the index covers it, or abandoned after its attempts. A time window is asked for up to now at most.",
  // A request names an asset, not a rollup: it asks that asset's producers to send it again.
  access: 'events',
  body: { description: 'the asset and window, and where to send it', schema: RepairBody },
  answers: { 200: { description: 'what was requested (or why nothing was)', schema: RepairRequested } },
  errors: {
    400: 'invalid_payload; invalid_repair: an unknown asset, a bad or empty window, one starting in the future, a bad target, or no target to send it to',
  },
});
