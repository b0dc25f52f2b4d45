/** `GET /v1/assets` and `GET /v1/assets/{asset}/coverage`. */
import { z } from 'zod';
import { DEFAULT_LIMIT, MAX_LIMIT } from '../../core/coverage-answer.js';
import { WAIT_PATTERN } from '../../core/wait.js';
import { defineOperation } from '../operation.js';
import {
  BOUND_TEXT_PATTERN,
  Bound,
  coded,
  Domain,
  Freshness,
  nameFilter,
  pageCursor,
  pageLimit,
  queryInt,
  ReplayRequiredRange,
  Span,
  Timestamp,
} from './common.js';
import { ASSET_NAME } from './event-spellings.js';

export const AssetParams = z.object({
  asset: z.string().meta({ description: 'the asset name, percent-encoded', pattern: ASSET_NAME.pattern }),
});

export const Asset = z.object({
  asset: z.string(),
  domain: Domain,
  zone: z.string().meta({ description: 'IANA zone timestamps without an offset are read in' }),
  event_count: z.int(),
  segment_count: z.int(),
  covered_extent: Span.nullable().meta({ description: 'lowest start and highest end of its segments' }),
  updated_at: Timestamp,
  ...Freshness.shape,
});

export const DEFAULT_ASSETS = 1000;
export const MAX_ASSETS = 10_000;

export const AssetListQuery = z.object({
  q: nameFilter("part of the asset's name, any case"),
  limit: pageLimit(DEFAULT_ASSETS, MAX_ASSETS),
  cursor: pageCursor,
});

export const AssetList = z.object({
  assets: z.array(Asset),
  total: z.int().meta({ description: 'assets matching q, on every page' }),
  next_cursor: z.string().nullable().meta({ description: 'null on the last page' }),
});

export const listAssets = defineOperation({
  method: 'GET',
  path: '/v1/assets',
  id: 'listAssets',
  summary: 'The assets the index knows, by name, with their facts and freshness, a page at a time',
  access: 'read',
  query: AssetListQuery,
  answers: { 200: { description: 'one page of assets, by name', schema: AssetList } },
  errors: { 400: 'invalid_limit, invalid_cursor, invalid_query' },
});

const window = 'give the window as ?start=...&end=..., each once';

export const CoverageQuery = z.object({
  // The pattern is documented, not checked here: parseBound says what is wrong (invalid_bound).
  start: coded(
    z.string().meta({
      description: "the window's start, in the asset's form (an ISO 8601 timestamp or an integer)",
      pattern: BOUND_TEXT_PATTERN,
    }),
    'missing_bounds',
    window,
  ),
  end: coded(
    z.string().meta({ description: "the window's end (exclusive)", pattern: BOUND_TEXT_PATTERN }),
    'missing_bounds',
    window,
  ),
  limit: coded(
    queryInt(0, MAX_LIMIT, DEFAULT_LIMIT).meta({
      description: `most entries in each list (default ${DEFAULT_LIMIT})`,
    }),
    'invalid_limit',
    `limit must be an integer from 0 to ${MAX_LIMIT}`,
  ),
  wait: coded(
    z
      .string()
      .regex(WAIT_PATTERN)
      .optional()
      .meta({
        description:
          'hold the answer until the window is covered or this ISO 8601 duration has passed (PT30S, PT5M; at most http.max_wait, default PT15M), then answer as without it; an asset not seen yet is waited for too',
        examples: ['PT5M'],
      }),
    'invalid_wait',
    'wait must be an ISO 8601 duration of days, hours, minutes and seconds, such as PT30S or PT5M',
  ),
  order: coded(
    z.enum(['oldest', 'newest']).optional().meta({
      description:
        'which end of the window every list starts from; without it ranges are oldest first and batches newest first',
    }),
    'invalid_order',
    'order must be oldest or newest',
  ),
});

export const Batch = z.object({
  start: Bound,
  end: Bound,
  state: z.enum(['complete', 'gap', 'replay_required']),
  version: z.string().nullable(),
});

/** The coverage answer; its field names are a public contract (docs/http-api.md). */
export const CoverageAnswer = z.object({
  asset: z.string(),
  domain: Domain,
  start: Bound,
  end: Bound,
  covered: z.boolean(),
  ratio: z.number().min(0).max(1).meta({ description: 'complete share of the window' }),
  missing: z.array(Span),
  replay_required: z.array(ReplayRequiredRange),
  known_gaps: z.array(Span),
  batches: z.array(Batch),
  missing_count: z.int(),
  missing_total: z.number().meta({ description: 'seconds for time assets, values for integer assets' }),
  known_gaps_count: z.int(),
  replay_required_count: z.int(),
  truncated: z.boolean(),
  ...Freshness.shape,
  as_of: z
    .string()
    .optional()
    .meta({ description: 'ISO 8601: what the answer is current as of, when a read replica answered' }),
});

export const assetCoverage = defineOperation({
  method: 'GET',
  path: '/v1/assets/{asset}/coverage',
  id: 'assetCoverage',
  summary: 'Whether [start, end) of an asset is covered, and what is missing',
  access: 'read',
  params: AssetParams,
  query: CoverageQuery,
  description:
    'With `wait`, the answer comes as soon as a commit covers the window, or at the end of the wait with what is still missing (`covered: false`); the request is woken by the commits of its asset, not by polling. A waiting request reads the primary, never the read replica.',
  answers: { 200: { description: 'the coverage answer', schema: CoverageAnswer } },
  errors: {
    400: 'a bad window, limit, order or wait: missing_bounds, invalid_bound, out_of_range, end_before_start, invalid_limit, invalid_order, invalid_wait',
    404: 'unknown_asset: an asset neither seen nor declared with a domain (with wait: still unknown at its end)',
    414: 'fst_err_max_param_length: an asset name longer than any the worker accepts',
    503: 'too_many_waiters: this instance already holds http.max_waiters waiting requests; Retry-After says when to ask again',
  },
});
