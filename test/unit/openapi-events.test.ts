/**
 * The event language of the OpenAPI document against the worker's normaliser, both ways, on
 * generated events: an event the normaliser accepts is one the document allows (else a generated
 * client could not send it, and a tool such as schemathesis reports a "schema-violating request
 * accepted"), and an event the document allows is accepted or refused only for what no JSON Schema
 * states (BEYOND_SCHEMA). The same rule as test/real/schemathesis.real.test.ts, without a daemon.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BadInputError } from '../../src/core/errors.js';
import { normalizeEvent } from '../../src/core/events.js';
import { EVENT_SCHEMA, REPLAY_BODY_SCHEMA } from '../../src/http/schemas/event-spellings.js';

const options = { maxPayloadBytes: 65_536 };
const ajv = new Ajv2020({ strict: false, allErrors: false });
const documentAllowsEvent = ajv.compile(EVENT_SCHEMA);
const documentAllowsReplay = ajv.compile(REPLAY_BODY_SCHEMA);

/**
 * Refusals that depend on a bound's calendar, order or domain, a duration's grammar, a
 * timestamp's calendar, or text PostgreSQL cannot store anywhere inside `extra` (U+0000).
 */
const BEYOND_SCHEMA = new Set([
  'invalid_bound',
  'out_of_range',
  'mixed_domain',
  'domain_mismatch',
  'end_before_start',
  'invalid_duration',
]);
const beyondSchema = ({ reason, message }: BadInputError) =>
  BEYOND_SCHEMA.has(reason) ||
  (reason === 'invalid_interval' &&
    message.startsWith('a start/duration interval needs a timestamp start')) ||
  (reason === 'invalid_field' && /^(produced_at |timestamp |extra holds text)/.test(message));

function normalised(raw: unknown): BadInputError | null {
  try {
    normalizeEvent(raw, options);
    return null;
  } catch (error) {
    if (error instanceof BadInputError) return error;
    throw error;
  }
}

const astral = '\u{1F600}';
const text = fc.constantFrom(
  '',
  ' ',
  'a',
  ' warehouse.orders ',
  '\u00a0x\ufeff',
  'x\u0085',
  'tab\there',
  'nul\u0000',
  'v'.repeat(256),
  'v'.repeat(257),
  astral.repeat(200),
  astral.repeat(257),
  'n'.repeat(512),
  ` ${'n'.repeat(512)} `,
  'n'.repeat(513),
  astral.repeat(512),
);
const bound = fc.constantFrom(
  '2025-06-01T10:05:00Z',
  ' 2025-06-01T10:10:00+02 ',
  '2025-06-01 10:05',
  '2025-06-01',
  '2025-02-30',
  '2025-06-01T10:05:00.1234567Z',
  '2025-06-01T10:05:00.123456789Z',
  '2025-06-01T10:05-34:07',
  '４２',
  '42',
  ' -7 ',
  '9007199254740993',
  'soon',
  '',
  7,
  -3,
  1.5,
  2 ** 53,
  null,
  true,
);
const interval = fc.constantFrom(
  '2025-06-01T10:05:00Z/PT5M',
  '2025-06-01T10:05:00Z/2025-06-01T10:10:00Z',
  ' 2025-06-01T10:05:00Z / pt5m ',
  '2025-06-01T10:05:00Z/PT0S',
  '2025-06-01T10:05:00Z/P',
  '100/200',
  '100/PT5M',
  'a/b',
  '/x',
  'a//b',
  '2025-06-01',
  '2025-06-01T00:00:00Z/2025-06-01T01:00:00Z/x',
  5,
  null,
);
const any = fc.oneof(text, bound, interval, fc.jsonValue({ maxDepth: 2 }));
const extra = fc.oneof(
  fc.constant(null),
  fc.constant([]),
  fc.constant('x'),
  fc.constant({ note: 'nul\u0000' }),
  fc.record({ interval_start: bound, interval_end: bound }, { requiredKeys: [] }),
  fc.dictionary(fc.constantFrom('a', 'interval_start', '__proto__'), any, { maxKeys: 2 }),
);
const label = fc.oneof(
  text,
  fc.constantFrom(0, 3, 1.5, 2 ** 53, -(2 ** 53) + 1, 1.2345678901234568e29, null, {}, []),
);
const fields = {
  type: fc.constantFrom('completion', 'replay_requirement', null, 'deletion', 1),
  asset: fc.oneof(text, fc.constantFrom(null, 5)),
  name: fc.oneof(text, fc.constantFrom(null, 5)),
  uri: fc.oneof(text, fc.constantFrom(null, 5)),
  asset_uri: fc.oneof(text, fc.constant(null)),
  dataset_uri: text,
  start: bound,
  end: bound,
  interval,
  partition_key: fc.oneof(interval, fc.constantFrom('2025-06-01', 3, null)),
  extra,
  version: label,
  id: label,
  produced_at: fc.oneof(bound, text),
  timestamp: fc.oneof(bound, fc.constant(5)),
  other: any,
};
type Field = keyof typeof fields;

/** Valid events of each spelling, each way of naming the asset: one field changed finds a rule. */
const VALID: readonly Record<string, unknown>[] = [
  ...(EVENT_SCHEMA.examples as Record<string, unknown>[]),
  { name: 'orders', start: 1, end: 2 },
  { asset: null, uri: 's3://lake/orders', interval: '2025-06-01T10:00:00Z/PT1H' },
  { asset_uri: 'a', partition_key: '2025-06-01T10:00:00Z/2025-06-01T11:00:00Z', timestamp: null },
  { dataset_uri: 'd', start: '10', end: '20', version: 7, id: null, produced_at: null, extra: null },
];
const changes = fc
  .uniqueArray(fc.constantFrom(...(Object.keys(fields) as Field[])), { maxLength: 3 })
  .chain((keys) =>
    fc.record(Object.fromEntries(keys.map((k) => [k, fields[k]])) as Record<Field, fc.Arbitrary<unknown>>),
  );
const event = fc.oneof(
  fc.tuple(fc.constantFrom(...VALID), changes).map(([base, changed]) => ({ ...base, ...changed })),
  fc.record(fields, { requiredKeys: [] }),
);

describe('the document and the normaliser agree on events', () => {
  it('POST /v1/events: an accepted event is allowed, an allowed one is refused only beyond the schema', () => {
    fc.assert(
      fc.property(event, (raw) => {
        const refusal = normalised(raw);
        const allowed = documentAllowsEvent(raw);
        if (refusal === null) expect(allowed, JSON.stringify(ajv.errors)).toBe(true);
        else if (allowed) expect(beyondSchema(refusal), `${refusal.reason}: ${refusal.message}`).toBe(true);
      }),
      { numRuns: 5_000 },
    );
  });

  it('POST /v1/assets/{asset}/replay-requirements: the same, with the asset and type from the path', () => {
    fc.assert(
      fc.property(event, (body) => {
        const refusal = normalised({ ...body, type: 'replay_requirement', asset: 'from.path' });
        const allowed = documentAllowsReplay(body);
        if (refusal === null) expect(allowed, JSON.stringify(ajv.errors)).toBe(true);
        else if (allowed) expect(beyondSchema(refusal), `${refusal.reason}: ${refusal.message}`).toBe(true);
      }),
      { numRuns: 5_000 },
    );
  });

  it('finds both kinds of disagreement (the properties can fail)', () => {
    // Allowed by the document, refused by the normaliser for a reason a schema states.
    const tooLong = { asset: 'a', start: 1, end: 2, version: 'v'.repeat(257) };
    expect(normalised(tooLong)?.reason).toBe('invalid_field');
    expect(ajv.validate({ ...EVENT_SCHEMA, properties: {} }, tooLong)).toBe(true);
    // Accepted by the normaliser, refused by a document that forgot null is absent.
    const nullExtra = { asset: 'a', start: 1, end: 2, extra: null };
    expect(normalised(nullExtra)).toBeNull();
    const extraObjectOnly = {
      ...EVENT_SCHEMA,
      properties: { ...(EVENT_SCHEMA.properties as object), extra: { type: 'object' } },
    };
    expect(ajv.validate(extraObjectOnly, nullExtra)).toBe(false);
  });
});
