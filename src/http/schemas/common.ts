/** Shapes several answers share, and the helpers query schemas are built from. */
import { z } from 'zod';
import { DECIMAL, ISO_TIME } from '../../core/bounds.js';
import { PERIOD_STATES } from '../../core/policy.js';

/** What String.prototype.trim() removes (ECMAScript WhiteSpace and LineTerminator), spelt out. */
export const TRIMMED =
  '\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff';

/**
 * A regex's source as a JSON Schema pattern: no anchors, groups that capture nothing, `\d` spelt
 * [0-9] (Python's `\d`, which tools such as schemathesis use, also takes other scripts' digits).
 */
const patternBody = (regex: RegExp) =>
  regex.source
    .replace(/^\^|\$$/g, '')
    .replace(/\((?!\?)/g, '(?:')
    .replaceAll('\\d', '[0-9]');

/**
 * A bound's text: an ISO 8601 timestamp (Z, z, +hh, +hhmm, +hh:mm or no offset; T or a space;
 * fractions to the nanosecond, non-zero only to the microsecond) or a decimal integer, with
 * surrounding whitespace. The grammar, not the calendar or the domain: 2025-02-30 matches and is
 * refused (invalid_bound), as is a timestamp for an integer asset.
 */
export const BOUND_TEXT_PATTERN = `^${boundText('integer', 'time')}$`;

/** A timestamp's text alone (produced_at), with surrounding whitespace. */
export const TIMESTAMP_TEXT_PATTERN = `^${boundText('time')}$`;

/**
 * An ISO 8601 interval as events spell it: a bound, a slash, and a bound or a duration (its
 * grammar is luxon's: `P` and anything but a slash here).
 */
export const INTERVAL_TEXT_PATTERN = `^${boundText('integer', 'time')}/(?:${boundText('integer', 'time')}|[${TRIMMED}]*[Pp][^/]*)$`;

function boundText(...domains: Array<'integer' | 'time'>): string {
  const grammar = domains.map((d) => patternBody(d === 'integer' ? DECIMAL : ISO_TIME)).join('|');
  return `[${TRIMMED}]*(?:${grammar})[${TRIMMED}]*`;
}

/** Text without U+0000, which PostgreSQL can neither store nor compare. */
export const NO_NUL = '^[^\\u0000]*$';

/**
 * A text field of a body: `min` to `max` characters counted as JSON Schema counts them (code
 * points: zod's own max counts UTF-16 units, two for an emoji), without U+0000.
 */
export function text(min: number, max: number) {
  return z
    .string()
    .refine((value) => {
      if (value.includes('\u0000')) return false;
      const length = [...value].length;
      return length >= min && length <= max;
    })
    .meta({ minLength: min, maxLength: max, pattern: NO_NUL });
}

/** A point in the asset's or rollup's own form: ISO 8601 for time, a JSON number for integers. */
export const Bound = z
  .union([z.string(), z.int()])
  .meta({ description: 'ISO 8601 for a time asset or rollup, a JSON integer for an integer one' });

export const Timestamp = z.iso.datetime();

export const Domain = z.enum(['time', 'integer']);

export const PeriodState = z.enum(PERIOD_STATES);

export const Span = z.object({ start: Bound, end: Bound });

export const ReplayRequiredRange = z.object({
  start: Bound,
  end: Bound,
  version: z.string().nullable().meta({ description: 'the newest completion covering it, if any' }),
  required_version: z.string(),
});

/** Freshness: in the coverage answer and `/v1/assets`. */
export const Freshness = z.object({
  covered_until: Bound.nullable(),
  lag_seconds: z.number().nullable(),
  last_event_at: Timestamp.nullable(),
  max_lag: z.string().nullable(),
  stale: z.boolean().nullable(),
  stale_reason: z.string().nullable(),
});

/**
 * Every error answer: `{code, message}`, plus details for some codes (`errors` for
 * `invalid_events`). Open, so a detail added to one code does not break clients of the others.
 */
export const ErrorBody = z.looseObject({
  code: z.string().meta({ description: 'stable, machine-readable' }),
  message: z.string().meta({ description: 'for people; may change' }),
});

/** What a request field answers when it fails its schema: the route's error code and message. */
export interface FieldError {
  readonly code: string;
  readonly message: string;
}

/** Field schema -> its error; read when a request fails validation (see ../request.ts). */
export const fieldErrors = z.registry<FieldError>();

/** Registers `schema`'s error. Apply it last: `.meta()` and the like return a new schema. */
export function coded<T extends z.ZodType>(schema: T, code: string, message: string): T {
  fieldErrors.add(schema, { code, message });
  return schema;
}

/**
 * A decimal integer in a query string, documented as an integer. Anything but digits stays a
 * string and fails the integer check, so `1e3`, ` 5` and `0x10` are refused, not read as numbers.
 */
export function queryInt(min: number, max: number, fallback: number) {
  return z
    .preprocess(
      (raw) => (typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : raw),
      z.int().min(min).max(max),
    )
    .default(fallback);
}

/** A listing's page size, 1 to `max`. */
export const pageLimit = (fallback: number, max: number) =>
  coded(
    queryInt(1, max, fallback).meta({ description: `page size (default ${fallback})` }),
    'invalid_limit',
    `limit must be an integer from 1 to ${max}`,
  );

/** A listing's cursor: the previous page's next_cursor. */
export const pageCursor = coded(
  z.string().optional().meta({ description: "the previous page's next_cursor" }),
  'invalid_cursor',
  'cursor is not one this listing returned (in this order)',
);

/** A listing's name filter, `q`, given at most once. */
export const nameFilter = (description: string) =>
  coded(z.string().optional().meta({ description }), 'invalid_query', 'q must be given at most once');

/**
 * What Node's HTTP parser answers (through fastify's client error handler) to a request line and
 * headers over its 16 KB limit, before any route: every operation, probes included, can get it.
 */
export const HeadersTooLarge = z.object({
  error: z.literal('Request Header Fields Too Large'),
  message: z.string(),
  statusCode: z.literal(431),
});
