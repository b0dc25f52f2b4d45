/**
 * Every spelling of an event the queue accepts (docs/events.md), as JSON Schema for the
 * OpenAPI document, so a generated client can send each of them. Documentation only: requests are
 * checked by the worker's normaliser (src/core/events.ts), which names a reason per refused item;
 * each spelling's example is fed through it by test/unit/openapi.test.ts.
 */

type Json = Record<string, unknown>;

const text = (description: string): Json => ({ type: 'string', description });
const bound = (description: string): Json => ({
  anyOf: [{ type: 'string' }, { type: 'integer' }],
  description: `${description}: an ISO 8601 timestamp (without an offset: the asset's zone), or an integer (a JSON integer or a decimal string) for an integer asset`,
});
const label = (what: string): Json => ({
  anyOf: [{ type: 'string' }, { type: 'integer' }],
  description: what,
});

/** Fields every completion spelling may carry besides its bounds; any other key is kept as data. */
const common: Json = {
  type: { type: 'string', enum: ['completion'], description: 'omit it, or "completion"' },
  version: label('the version the range was produced at (a string or a safe integer)'),
  id: label('a stable id (a batch or commit id): a re-send with the same id changes nothing'),
  produced_at: text("the producer's clock, ISO 8601; shown, never used for ordering"),
  extra: { type: 'object', additionalProperties: true, description: 'any JSON object, stored as written' },
};

const asset = text('the asset (1-512 printable characters)');

const spelling = (title: string, properties: Json, required: string[], example: Json): Json => ({
  title,
  type: 'object',
  properties: { ...common, ...properties },
  required,
  additionalProperties: true,
  examples: [example],
});

/** `POST /v1/assets/{asset}/replay-requirements`: the fields of a replay requirement but its asset. */
export const REPLAY_FIELDS: Json = {
  start: bound('first point to rebuild'),
  end: bound('end (half-open)'),
  version: label('the version the range must be rebuilt at (not empty)'),
  id: common.id,
  produced_at: common.produced_at,
  extra: common.extra,
};

export const EVENT_SPELLINGS: readonly Json[] = [
  spelling(
    'Completion',
    { asset, start: bound('first point covered'), end: bound('first point after the range (half-open)') },
    ['asset', 'start', 'end'],
    {
      asset: 'warehouse.orders',
      start: '2025-06-01T10:05:00Z',
      end: '2025-06-01T10:10:00Z',
      version: 'v3',
      id: 'spark-batch-8812',
      produced_at: '2025-06-01T10:10:07Z',
      extra: {},
    },
  ),
  spelling(
    'CompletionInterval',
    {
      asset,
      interval: text('an ISO 8601 interval: start/end or start/duration (2025-06-01T10:05:00Z/PT5M)'),
    },
    ['asset', 'interval'],
    { asset: 'warehouse.orders', interval: '2025-06-01T10:05:00Z/PT5M' },
  ),
  spelling(
    'CompletionPartitionKey',
    { asset, partition_key: text("Airflow's partition key holding an ISO 8601 interval") },
    ['asset', 'partition_key'],
    { asset: 'warehouse.orders', partition_key: '2025-06-01T10:00:00Z/2025-06-01T11:00:00Z' },
  ),
  spelling(
    'CompletionAirflowExtra',
    {
      asset,
      extra: {
        type: 'object',
        properties: { interval_start: bound('first point covered'), interval_end: bound('end (half-open)') },
        required: ['interval_start', 'interval_end'],
        additionalProperties: true,
      },
    },
    ['asset', 'extra'],
    {
      asset: 'warehouse.orders',
      extra: { interval_start: '2025-06-01T10:00:00Z', interval_end: '2025-06-01T11:00:00Z' },
    },
  ),
  spelling(
    'AirflowAssetEvent',
    {
      uri: text('the asset, when it has no name'),
      name: text('the asset (preferred over uri)'),
      timestamp: text('becomes produced_at'),
      id: label('the Airflow event id'),
      extra: {
        type: 'object',
        properties: { interval_start: bound('first point covered'), interval_end: bound('end (half-open)') },
        required: ['interval_start', 'interval_end'],
        additionalProperties: true,
      },
    },
    ['uri', 'extra'],
    {
      id: 42,
      uri: 's3://lake/orders',
      name: 'orders',
      timestamp: '2025-06-01T11:00:03Z',
      extra: { interval_start: '2025-06-01T10:00:00Z', interval_end: '2025-06-01T11:00:00Z' },
    },
  ),
  spelling(
    'ReplayRequirement',
    {
      type: { type: 'string', enum: ['replay_requirement'] },
      asset,
      ...REPLAY_FIELDS,
    },
    ['type', 'asset', 'start', 'end', 'version'],
    {
      type: 'replay_requirement',
      asset: 'warehouse.orders',
      start: '2025-06-01T10:00:00Z',
      end: '2025-06-01T11:00:00Z',
      version: 'v4',
    },
  ),
];

/** One example per spelling, integer bounds included. */
export const EVENT_EXAMPLES: readonly unknown[] = [
  ...EVENT_SPELLINGS.flatMap((s) => s.examples as unknown[]),
  { asset: 'kafka.clicks', start: 4096, end: '8192' },
];
