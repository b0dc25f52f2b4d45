/**
 * The events the queue accepts (docs/events.md), as JSON Schema for the OpenAPI document: the
 * language of the worker's normaliser (src/core/events.ts), written out rule by rule, so that a
 * request the document allows is refused only for what a schema cannot say (a bound's grammar and
 * order, its asset's domain, the size of the whole event) and one it forbids is never accepted.
 * Requests are still checked by the normaliser, which names a reason per refused item;
 * test/unit/openapi.test.ts feeds the normaliser each example, and test/unit/openapi-events.test.ts
 * generated events on both sides of each rule.
 *
 * The normaliser reads some fields only when others are absent (the asset from `asset`, else
 * `name`, else `uri`, ...; `timestamp` only without `produced_at`; the bounds from `start`/`end`,
 * else `interval`, ...). A field that is not read may hold anything, so its type is stated in the
 * branch that reads it, not for the whole event.
 */
import { MAX_ASSET_LENGTH, MAX_TEXT_LENGTH } from '../../core/events.js';
import { BOUND_TEXT_PATTERN, INTERVAL_TEXT_PATTERN, TIMESTAMP_TEXT_PATTERN, TRIMMED } from './common.js';

type Json = Record<string, unknown>;

const CONTROL = '\\u0000-\\u001f\\u007f';
const SAFE = Number.MAX_SAFE_INTEGER;

/** An asset name: 1-512 characters once trimmed, none of them a control character. */
export const ASSET_NAME: Json = {
  type: 'string',
  pattern: `^[${TRIMMED}]*[^${TRIMMED}${CONTROL}](?:[^${CONTROL}]{0,${MAX_ASSET_LENGTH - 2}}[^${TRIMMED}${CONTROL}])?[${TRIMMED}]*$`,
  description: `the asset: 1-${MAX_ASSET_LENGTH} characters without control characters (surrounding whitespace is trimmed)`,
};

const bound = (description: string): Json => ({
  anyOf: [
    { type: 'string', pattern: BOUND_TEXT_PATTERN },
    { type: 'integer', minimum: -SAFE, maximum: SAFE },
  ],
  description: `${description}: an ISO 8601 timestamp (without an offset: the asset's zone), or an integer (a JSON integer or a decimal string) for an integer asset`,
});
const labelText = (minLength: number): Json => ({
  type: 'string',
  minLength,
  maxLength: MAX_TEXT_LENGTH,
  pattern: `^[^${CONTROL}]*$`,
});
const safeInteger: Json = { type: 'integer', minimum: -SAFE, maximum: SAFE };
const label = (description: string): Json => ({
  anyOf: [labelText(0), safeInteger, { type: 'null' }],
  description: `${description}: a string of at most ${MAX_TEXT_LENGTH} characters without control characters, or a safe integer (kept as its digits); null is the same as absent`,
});
/** `start/end` or `start/duration`, split at its one slash. */
const intervalText = (description: string): Json => ({
  type: 'string',
  pattern: INTERVAL_TEXT_PATTERN,
  description,
});
const timestampText = { type: 'string', pattern: TIMESTAMP_TEXT_PATTERN };
const nothing: Json = { type: 'null' };
const absent = (...keys: string[]): Json => ({ not: { anyOf: keys.map((key) => ({ required: [key] })) } });

/** Fields read whenever present: their types hold in every spelling. */
const FIELDS: Json = {
  type: {
    anyOf: [{ enum: ['completion', 'replay_requirement'] }, nothing],
    description: 'omit it (or null, or "completion") for a completion',
  },
  start: bound('first point covered'),
  end: bound('first point after the range (half-open)'),
  version: label('the version the range was produced at'),
  id: label('a stable id (a batch or commit id): a re-send with the same id changes nothing'),
  produced_at: {
    anyOf: [timestampText, nothing],
    description:
      "the producer's clock, an ISO 8601 timestamp; shown, never used for ordering; null is the same as absent",
  },
  extra: {
    type: ['object', 'null'],
    additionalProperties: true,
    description:
      'any JSON object, stored as written (no U+0000 in its text, at most 32 levels deep); null is the same as absent',
  },
};

/** Read only when the fields before them are absent; described here, typed in the branch that reads them. */
const SHADOWED: Json = {
  asset: { description: ASSET_NAME.description },
  name: { description: "Airflow's asset name: the asset when `asset` is absent" },
  uri: { description: "Airflow's asset URI: the asset when `asset` and `name` are absent" },
  asset_uri: { description: 'the asset when `asset`, `name` and `uri` are absent' },
  dataset_uri: { description: "Airflow 2's dataset URI: the asset when none of the above is given" },
  interval: { description: 'an ISO 8601 interval, read without start and end' },
  partition_key: { description: "Airflow's partition key: the interval when it holds one (start/end)" },
  timestamp: { description: "Airflow's event time: produced_at when produced_at is absent" },
};

/** Where the asset's name is read from: the first of these fields that is given and not null. */
const ASSET_SOURCES = ['asset', 'name', 'uri', 'asset_uri', 'dataset_uri'];
const NAMING: Json = {
  anyOf: ASSET_SOURCES.map((field, at) => ({
    required: [field],
    properties: {
      ...Object.fromEntries(ASSET_SOURCES.slice(0, at).map((before) => [before, nothing])),
      [field]: ASSET_NAME,
    },
  })),
};

/** Bounds by precedence: start/end, interval, partition_key, extra.interval_start/interval_end. */
export const EVENT_SPELLINGS: readonly Json[] = [
  {
    title: 'start and end',
    required: ['start', 'end'],
    properties: {
      start: bound('first point covered'),
      end: bound('first point after the range (half-open)'),
    },
  },
  {
    title: 'interval',
    allOf: [absent('start', 'end')],
    required: ['interval'],
    properties: {
      interval: intervalText('an ISO 8601 interval: start/end or start/duration (2025-06-01T10:05:00Z/PT5M)'),
    },
  },
  {
    title: 'partition_key',
    allOf: [absent('start', 'end', 'interval')],
    required: ['partition_key'],
    properties: { partition_key: intervalText("Airflow's partition key holding an ISO 8601 interval") },
  },
  {
    title: 'Airflow extra',
    allOf: [absent('start', 'end', 'interval')],
    required: ['extra'],
    properties: {
      partition_key: {
        not: { type: 'string', pattern: '/' },
        description: 'a partition key without a slash (or not a string) holds no interval',
      },
      extra: {
        type: 'object',
        required: ['interval_start', 'interval_end'],
        properties: {
          interval_start: bound('first point covered'),
          interval_end: bound('end (half-open)'),
        },
        additionalProperties: true,
      },
    },
  },
];

const BOUNDS: Json = { anyOf: EVENT_SPELLINGS };

/** `timestamp` is read (and must be an ISO 8601 string) only when produced_at is absent or null. */
const PRODUCED: Json = {
  anyOf: [
    { required: ['produced_at'], properties: { produced_at: timestampText } },
    { properties: { timestamp: { anyOf: [timestampText, nothing] } } },
  ],
};

const REQUIRED_VERSION: Json = {
  anyOf: [labelText(1), safeInteger],
  description: 'the version the range must be rebuilt at (not empty)',
};

const KIND: Json = {
  anyOf: [
    { title: 'completion', properties: { type: { anyOf: [{ const: 'completion' }, nothing] } } },
    {
      title: 'replay requirement',
      required: ['type', 'version'],
      properties: { type: { const: 'replay_requirement' }, version: REQUIRED_VERSION },
    },
  ],
};

const EXAMPLES: readonly Json[] = [
  {
    asset: 'warehouse.orders',
    start: '2025-06-01T10:05:00Z',
    end: '2025-06-01T10:10:00Z',
    version: 'v3',
    id: 'spark-batch-8812',
    produced_at: '2025-06-01T10:10:07Z',
    extra: {},
  },
  { asset: 'warehouse.orders', interval: '2025-06-01T10:05:00Z/PT5M' },
  { asset: 'warehouse.orders', partition_key: '2025-06-01T10:00:00Z/2025-06-01T11:00:00Z' },
  {
    asset: 'warehouse.orders',
    extra: { interval_start: '2025-06-01T10:00:00Z', interval_end: '2025-06-01T11:00:00Z' },
  },
  {
    id: 42,
    uri: 's3://lake/orders',
    name: 'orders',
    timestamp: '2025-06-01T11:00:03Z',
    extra: { interval_start: '2025-06-01T10:00:00Z', interval_end: '2025-06-01T11:00:00Z' },
  },
  {
    type: 'replay_requirement',
    asset: 'warehouse.orders',
    start: '2025-06-01T10:00:00Z',
    end: '2025-06-01T11:00:00Z',
    version: 'v4',
  },
  { asset: 'kafka.clicks', start: 4096, end: '8192' },
];

/** One event of `POST /v1/events`, in any spelling. */
export const EVENT_SCHEMA: Json = {
  type: 'object',
  description:
    'an event in any spelling the queue accepts (docs/events.md); bounds by precedence: start and end, else interval, else partition_key, else extra.interval_start/interval_end; the asset from asset, else name, uri, asset_uri, dataset_uri. Other fields are ignored. Validated as the worker validates it; refusals are listed per item',
  properties: { ...FIELDS, ...SHADOWED },
  allOf: [NAMING, BOUNDS, KIND, PRODUCED],
  additionalProperties: true,
  examples: EXAMPLES,
};

/** The body of `POST /v1/assets/{asset}/replay-requirements`: a replay requirement but its asset and type. */
export const REPLAY_BODY_SCHEMA: Json = {
  type: 'object',
  description:
    "the range [start, end) that must be rebuilt at version, its bounds spelt as an event's are; asset and type are set from the path, other fields are ignored",
  properties: {
    ...FIELDS,
    version: REQUIRED_VERSION,
    ...SHADOWED,
    asset: { description: 'ignored: the asset is the one in the path' },
    type: { description: 'ignored: this is a replay requirement' },
  },
  required: ['version'],
  allOf: [BOUNDS, PRODUCED],
  additionalProperties: true,
  examples: [{ start: '2025-06-01T10:00:00Z', end: '2025-06-01T11:00:00Z', version: 'v4' }],
};
