import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../../src/config/index.js';
import { defineRollups } from '../../../../src/config/rollups.js';
import { BAD_INPUT_REASONS, BadInputError } from '../../../../src/core/errors.js';
import {
  type AssetDeclaration,
  type NormalizedEvent,
  normalizeEvent,
} from '../../../../src/core/events/events.js';

// A rollup reads kafka.offsets in buckets of 1000: an event may touch a million of them at most.
const [buckets] = defineRollups(
  parseConfig({
    rollups: [
      {
        id: 'buckets',
        upstream: 'kafka.offsets',
        every: 1000,
        begin: 0,
        target: { type: 'queue', queue: 'q' },
      },
    ],
  }),
);
const options = {
  maxPayloadBytes: 4096,
  assets: new Map<string, AssetDeclaration>([
    ['berlin.table', { domain: 'time', zone: 'Europe/Berlin' }],
    ['kafka.offsets', { domain: 'integer' }],
  ]),
  readersOf: (asset: string) => (asset === 'kafka.offsets' ? [buckets!.rollup] : []),
};
const norm = (raw: unknown): NormalizedEvent => normalizeEvent(raw, options);
const micros = (iso: string) => Date.parse(iso) * 1000;
const S = micros('2025-06-01T10:05:00Z');
const E = micros('2025-06-01T10:10:00Z');

function reasonOf(raw: unknown): string {
  try {
    norm(raw);
  } catch (error) {
    if (error instanceof BadInputError) {
      expect(error.message.length).toBeGreaterThan(10);
      return error.reason;
    }
    throw error;
  }
  throw new Error(`expected ${JSON.stringify(raw)} to be refused`);
}

describe('normalizeEvent: accepted spellings', () => {
  it('canonical form', () => {
    const e = norm({
      asset: 'warehouse.orders',
      start: '2025-06-01T10:05:00Z',
      end: '2025-06-01T10:10:00Z',
      version: 'v3',
      id: 'spark-batch-8812',
      produced_at: '2025-06-01T10:10:07Z',
      extra: { rows: 10 },
    });
    expect(e).toMatchObject({
      kind: 'completion',
      asset: 'warehouse.orders',
      domain: 'time',
      zone: 'UTC',
      start: { value: S, text: '2025-06-01T10:05:00Z', domain: 'time' },
      end: { value: E, text: '2025-06-01T10:10:00Z' },
      version: 'v3',
      id: 'spark-batch-8812',
      producedAt: '2025-06-01T10:10:07Z',
      extra: { rows: 10 },
      key: 'id:spark-batch-8812',
    });
  });

  const same: Array<[string, unknown]> = [
    [
      'type completion',
      { type: 'completion', asset: 'a', start: '2025-06-01T10:05:00Z', end: '2025-06-01T10:10:00Z' },
    ],
    ['interval start/end', { asset: 'a', interval: '2025-06-01T10:05:00Z/2025-06-01T10:10:00Z' }],
    ['interval start/duration', { asset: 'a', interval: '2025-06-01T10:05:00Z/PT5M' }],
    ['interval lower-case duration', { asset: 'a', interval: '2025-06-01T10:05:00Z/pt5m' }],
    ['interval with offsets', { asset: 'a', interval: '2025-06-01T12:05:00+02:00/2025-06-01T06:10:00-0400' }],
    ['partition_key interval', { asset: 'a', partition_key: '2025-06-01T10:05:00Z/2025-06-01T10:10:00Z' }],
    ['partition_key duration', { asset: 'a', partition_key: '2025-06-01T10:05:00+00/PT300S' }],
    [
      'extra.interval_*',
      {
        asset: 'a',
        extra: { interval_start: '2025-06-01T10:05:00Z', interval_end: '2025-06-01T10:10:00.000+00:00' },
      },
    ],
    ['uri instead of asset', { uri: 'a', start: '2025-06-01T10:05:00Z', end: '2025-06-01T10:10:00Z' }],
    [
      'dataset_uri (Airflow 2)',
      { dataset_uri: 'a', start: '2025-06-01T10:05:00Z', end: '2025-06-01T10:10:00Z' },
    ],
    ['padded asset name', { asset: '  a ', start: '2025-06-01T10:05:00Z', end: '2025-06-01T10:10:00Z' }],
  ];
  it.each(same)('%s', (_, raw) => {
    const e = norm(raw);
    expect(e.asset).toBe('a');
    expect(e.domain).toBe('time');
    expect([e.start.value, e.end.value]).toEqual([S, E]);
    expect(e.kind).toBe('completion');
  });

  it('keeps the producer text for display; durations get a formatted end', () => {
    const e = norm({ asset: 'a', interval: '2025-06-01T12:05:00+02:00/PT5M' });
    expect(e.start.text).toBe('2025-06-01T12:05:00+02:00');
    expect(e.end.text).toBe('2025-06-01T10:10:00Z');
  });

  it('a JSON string holding the event', () => {
    const e = norm(
      JSON.stringify({ asset: 'a', start: '2025-06-01T10:05:00Z', end: '2025-06-01T10:10:00Z' }),
    );
    expect([e.start.value, e.end.value]).toEqual([S, E]);
  });

  it('start/end win over the other spellings', () => {
    const e = norm({
      asset: 'a',
      start: '2025-06-01T10:05:00Z',
      end: '2025-06-01T10:10:00Z',
      partition_key: '2025-06-01',
      extra: { interval_start: '2025-01-01T00:00:00Z', interval_end: '2025-01-02T00:00:00Z' },
    });
    expect([e.start.value, e.end.value]).toEqual([S, E]);
  });

  it('a plain partition_key falls through to extra.interval_*', () => {
    const e = norm({
      asset: 'a',
      partition_key: 'eu-west',
      extra: { interval_start: '2025-06-01T10:05:00Z', interval_end: '2025-06-01T10:10:00Z' },
    });
    expect([e.start.value, e.end.value]).toEqual([S, E]);
  });

  it('Airflow 3 AssetEvent JSON as the REST API returns it', () => {
    const e = norm({
      id: 4711,
      asset_id: 3,
      uri: 's3://lake/orders',
      name: 'orders',
      group: 'asset',
      extra: {
        interval_start: '2025-06-01T10:05:00+00:00',
        interval_end: '2025-06-01T10:10:00+00:00',
        from_rest_api: true,
      },
      source_task_id: 'load',
      source_dag_id: 'orders_stream',
      source_run_id: 'scheduled__2025-06-01T10:05:00+00:00',
      source_map_index: -1,
      created_dagruns: [],
      timestamp: '2025-06-01T10:10:07.123456+00:00',
    });
    expect(e).toMatchObject({
      asset: 'orders',
      id: '4711',
      key: 'id:4711',
      producedAt: '2025-06-01T10:10:07.123456+00:00',
      start: { value: S },
      end: { value: E },
    });
  });

  it('Airflow AssetEvent with only a uri and a partition_key interval', () => {
    const e = norm({
      id: 9,
      uri: 's3://lake/orders',
      partition_key: '2025-06-01T10:05:00+00:00/2025-06-01T10:10:00+00:00',
      extra: {},
      timestamp: '2025-06-01T10:10:07+00:00',
    });
    expect(e.asset).toBe('s3://lake/orders');
    expect([e.start.value, e.end.value]).toEqual([S, E]);
  });

  it('integer bounds: JSON integers and decimal strings', () => {
    const a = norm({ asset: 'topic', start: 100, end: 250 });
    const b = norm({ asset: 'topic', start: '100', end: ' 250' });
    const c = norm({ asset: 'topic', interval: '100/250' });
    const d = norm({ asset: 'topic', extra: { interval_start: 100, interval_end: '250' } });
    for (const e of [a, b, c, d]) {
      expect(e.domain).toBe('integer');
      expect([e.start.value, e.end.value]).toEqual([100, 250]);
    }
    expect(b.start.text).toBe('100');
    // Same content, different spelling: same idempotency key.
    expect(a.key).toBe(b.key);
    const big = norm({
      asset: 'topic',
      start: -Number.MAX_SAFE_INTEGER,
      end: String(Number.MAX_SAFE_INTEGER),
    });
    expect(big.end.value).toBe(Number.MAX_SAFE_INTEGER);
    expect(norm({ asset: 'kafka.offsets', start: 0, end: 10 }).domain).toBe('integer');
  });

  it('a replay requirement', () => {
    const e = norm({
      type: 'replay_requirement',
      asset: 'a',
      start: '2025-06-01T10:05:00Z',
      end: '2025-06-01T10:10:00Z',
      version: 'v4',
    });
    expect(e).toMatchObject({
      kind: 'replay_requirement',
      version: 'v4',
      start: { value: S },
      end: { value: E },
    });
    const completion = norm({
      asset: 'a',
      start: '2025-06-01T10:05:00Z',
      end: '2025-06-01T10:10:00Z',
      version: 'v4',
    });
    expect(completion.key).not.toBe(e.key);
  });

  it('zero-width events are accepted', () => {
    const e = norm({ asset: 'a', start: '2025-06-01T10:05:00Z', end: '2025-06-01T10:05:00.000Z' });
    expect(e.end.value).toBe(e.start.value);
  });

  it('numeric versions and ids become text', () => {
    const e = norm({ asset: 'a', start: 1, end: 2, version: 3, id: 77 });
    expect(e.version).toBe('3');
    expect(e.id).toBe('77');
  });

  it('refuses a version or id that is a fraction or an unsafe integer: its text would not be the value sent', () => {
    // 1.2345678901234568e29: what JSON.parse makes of 123456789012345678901234567890.
    for (const field of ['version', 'id']) {
      for (const value of [1.5, 1.2345678901234568e29, 2 ** 53]) {
        expect(() => norm({ asset: 'a', start: 1, end: 2, [field]: value }), `${field} ${value}`).toThrow(
          `${field} must be a string or a safe integer, got ${value}`,
        );
      }
    }
    expect(norm({ asset: 'a', start: 1, end: 2, version: 2 ** 53 - 1 }).version).toBe('9007199254740991');
  });

  it('offsetless timestamps are read in the declared zone', () => {
    const e = norm({ asset: 'berlin.table', start: '2025-06-01T12:05:00', end: '2025-06-01T12:10:00' });
    expect(e.zone).toBe('Europe/Berlin');
    expect([e.start.value, e.end.value]).toEqual([S, E]);
    const day = norm({ asset: 'berlin.table', interval: '2025-03-30/P1D' });
    expect(day.end.value - day.start.value).toBe(23 * 3600 * 1e6);
  });
});

describe('normalizeEvent: bound order and spelling', () => {
  it('orders offsets by instant even when text order differs', () => {
    // 10:00+02:00 is 08:00Z, before 09:30Z although it sorts after it as text.
    const e = norm({ asset: 'a', start: '2025-06-01T10:00:00+02:00', end: '2025-06-01T09:30:00Z' });
    expect(e.end.value - e.start.value).toBe(90 * 60 * 1e6);
    expect(reasonOf({ asset: 'a', start: '2025-06-01T09:30:00Z', end: '2025-06-01T10:00:00+02:00' })).toBe(
      'end_before_start',
    );
  });

  it('mixed spellings of one instant compare equal and hash equal', () => {
    const spellings = [
      '2025-06-01T10:05:00Z',
      '2025-06-01T10:05:00+00',
      '2025-06-01T10:05:00+0000',
      '2025-06-01T10:05:00+00:00',
      '2025-06-01T10:05:00.000000Z',
      '2025-06-01T12:05:00.0+02:00',
    ];
    const events = spellings.map((start) => norm({ asset: 'a', start, end: '2025-06-01T10:10:00Z' }));
    expect(new Set(events.map((e) => e.start.value))).toEqual(new Set([S]));
    expect(new Set(events.map((e) => e.key)).size).toBe(1);
    // Zero-width across spellings is not end_before_start.
    expect(
      norm({ asset: 'a', start: '2025-06-01T10:05:00.000+00:00', end: '2025-06-01T12:05:00+0200' }).end.value,
    ).toBe(S);
  });

  it('content keys ignore key order and differ on any content change', () => {
    const a = norm({ asset: 'a', start: 1, end: 2, version: 'v1', extra: { x: 1, y: [1, { b: 2, a: 1 }] } });
    const b = norm({ extra: { y: [1, { a: 1, b: 2 }], x: 1 }, version: 'v1', end: 2, start: 1, asset: 'a' });
    expect(a.key).toBe(b.key);
    expect(a.key).toMatch(/^sha256:[0-9a-f]{32}$/);
    expect(norm({ asset: 'a', start: 1, end: 2, version: 'v2' }).key).not.toBe(
      norm({ asset: 'a', start: 1, end: 2, version: 'v1' }).key,
    );
    expect(norm({ asset: 'a', start: 1, end: 3, version: 'v1' }).key).not.toBe(
      norm({ asset: 'a', start: 1, end: 2, version: 'v1' }).key,
    );
  });

  it('bounds order by instant for random offsets (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: Date.UTC(2000, 0, 1), max: Date.UTC(2100, 0, 1) }),
        fc.integer({ min: 0, max: 3 * 86_400_000 }),
        fc.integer({ min: -12, max: 14 }),
        fc.integer({ min: -12, max: 14 }),
        (startMs, width, h1, h2) => {
          const spell = (ms: number, h: number) => {
            const local = new Date(ms + h * 3_600_000).toISOString().slice(0, 23);
            return `${local}${h < 0 ? '-' : '+'}${String(Math.abs(h)).padStart(2, '0')}:00`;
          };
          const e = norm({ asset: 'a', start: spell(startMs, h1), end: spell(startMs + width, h2) });
          expect(e.end.value - e.start.value).toBe(width * 1000);
        },
      ),
    );
  });
});

describe('normalizeEvent: bad input', () => {
  const ok = { asset: 'a', start: '2025-06-01T10:05:00Z', end: '2025-06-01T10:10:00Z' };
  const cases: Array<[string, unknown]> = [
    ['invalid_json', '{"asset": "a", '],
    ['invalid_json', 'not json'],
    ['payload_too_large', { ...ok, extra: { blob: 'x'.repeat(5000) } }],
    ['payload_too_large', JSON.stringify({ ...ok, extra: { blob: 'x'.repeat(5000) } })],
    ['invalid_payload', [ok]],
    ['invalid_payload', null],
    ['invalid_payload', 42],
    ['invalid_payload', '"a string"'],
    ['missing_asset', { start: ok.start, end: ok.end }],
    ['missing_asset', { ...ok, asset: '' }],
    ['invalid_asset', { ...ok, asset: 42 }],
    ['invalid_asset', { ...ok, asset: '   ' }],
    ['invalid_asset', { ...ok, asset: 'a\nb' }],
    ['invalid_asset', { ...ok, asset: 'x'.repeat(513) }],
    ['missing_bounds', { asset: 'a' }],
    ['missing_bounds', { asset: 'a', start: ok.start }],
    ['missing_bounds', { asset: 'a', end: ok.end }],
    ['missing_bounds', { asset: 'a', partition_key: '2025-06-01' }],
    ['missing_bounds', { asset: 'a', extra: { interval_start: ok.start } }],
    ['invalid_bound', { asset: 'a', start: 'yesterday', end: ok.end }],
    ['invalid_bound', { asset: 'a', start: ok.start, end: 'tomorrow' }],
    ['invalid_bound', { asset: 'a', start: true, end: false }],
    ['invalid_bound', { asset: 'a', start: { t: 1 }, end: ok.end }],
    ['invalid_bound', { asset: 'a', start: 1.5, end: 2 }],
    ['invalid_bound', { asset: 'a', start: '2025-06-01T10:05:00.0000001Z', end: ok.end }],
    ['invalid_bound', { asset: 'a', start: '2025-02-30T00:00:00Z', end: ok.end }],
    ['invalid_bound', { asset: 'a', start: null, end: ok.end }],
    ['invalid_bound', { asset: 'kafka.offsets', start: 'ten', end: 20 }],
    ['invalid_interval', { asset: 'a', interval: 5 }],
    ['invalid_interval', { asset: 'a', interval: '2025-06-01T10:05:00Z' }],
    ['invalid_interval', { asset: 'a', interval: '2025-06-01T10:05:00Z/' }],
    ['invalid_interval', { asset: 'a', interval: 'a/b/c' }],
    ['invalid_interval', { asset: 'a', interval: '100/PT5M' }],
    ['invalid_duration', { asset: 'a', interval: '2025-06-01T10:05:00Z/PT5X' }],
    ['invalid_duration', { asset: 'a', interval: '2025-06-01T10:05:00Z/PT0S' }],
    ['out_of_range', { asset: 'a', start: 0, end: 2 ** 53 }],
    ['out_of_range', { asset: 'a', start: '-9007199254740993', end: '0' }],
    ['out_of_range', { asset: 'a', start: '2025-06-01T00:00:00Z', end: '3000-01-01T00:00:00Z' }],
    ['mixed_domain', { asset: 'a', start: 100, end: ok.end }],
    ['mixed_domain', { asset: 'a', start: ok.start, end: '200' }],
    ['mixed_domain', { asset: 'a', interval: '2025-06-01T10:05:00Z/200' }],
    ['domain_mismatch', { asset: 'kafka.offsets', start: ok.start, end: ok.end }],
    ['domain_mismatch', { asset: 'berlin.table', start: 1, end: 2 }],
    ['end_before_start', { asset: 'a', start: ok.end, end: ok.start }],
    ['end_before_start', { asset: 'a', start: 10, end: '9' }],
    ['invalid_field', { ...ok, version: { v: 1 } }],
    ['invalid_field', { ...ok, version: 'v\u0000' }],
    ['invalid_field', { ...ok, version: 'v'.repeat(300) }],
    ['invalid_field', { ...ok, version: 1.5 }],
    ['invalid_field', { ...ok, version: 1.2345678901234568e29 }],
    ['invalid_field', { ...ok, version: Number.POSITIVE_INFINITY }],
    ['invalid_field', { ...ok, id: [1] }],
    ['invalid_field', { ...ok, id: true }],
    ['invalid_field', { ...ok, extra: [] }],
    ['invalid_field', { ...ok, extra: 'x' }],
    ['invalid_field', { ...ok, produced_at: 'later' }],
    ['invalid_field', { ...ok, timestamp: 12 }],
    ['invalid_field', { ...ok, type: 'replay_requirement' }],
    ['unknown_type', { ...ok, type: 'deletion' }],
    ['unknown_type', { ...ok, type: 1 }],
    ['too_many_periods', { asset: 'kafka.offsets', start: 0, end: 1_000_000_001 }],
  ];

  it.each(cases)('%s: %j', (reason, raw) => {
    expect(reasonOf(raw)).toBe(reason);
  });

  it('says "event", not "job data", for a string that is not JSON: a POST /v1/events item gets the same message', () => {
    expect(() => norm('not json')).toThrow('the event is a string that does not parse as JSON');
  });

  it('names a misspelt bound, which is otherwise kept as data', () => {
    expect(() => norm({ asset: 'a', strat: ok.start, end: ok.end })).toThrow(
      'the event has "end" but no "start"; "strat" is not a field (did you mean "start"?)',
    );
    expect(() => norm({ asset: 'a', strat: ok.start, edn: ok.end })).toThrow(
      '"strat" is not a field (did you mean "start"?)',
    );
    expect(() => norm({ asset: 'a', start: ok.start })).toThrow('the event has "start" but no "end"');
  });

  it('covers every reason code of the contract', () => {
    expect(new Set(cases.map(([r]) => r))).toEqual(new Set(BAD_INPUT_REASONS));
  });

  it('never throws anything but BadInputError on arbitrary JSON', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), fc.jsonValue(), (start, end, extra) => {
        for (const raw of [{ asset: 'a', start, end }, { asset: 'a', interval: start, extra }, start]) {
          try {
            const e = norm(raw);
            expect(e.end.value).toBeGreaterThanOrEqual(e.start.value);
            expect(Number.isSafeInteger(e.start.value) && Number.isSafeInteger(e.end.value)).toBe(true);
          } catch (error) {
            expect(error).toBeInstanceOf(BadInputError);
          }
        }
      }),
    );
  });
});
