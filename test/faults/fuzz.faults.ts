import { Queue } from 'bullmq';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { deadLetterJobId } from '../../src/queue/dead-letter.js';
import { connect } from '../../src/store/pg/db.js';
import { createTestDatabase } from '../helpers/db.js';
import { processHarness } from '../helpers/process.js';
import {
  daemonConfig,
  errorLines,
  intFromEnv,
  Producer,
  pending,
  prng,
  queueCounts,
  RedisServer,
  report,
  round,
  seedFromEnv,
  shuffle,
  sleep,
  TOKEN,
} from './lib.js';

/**
 * Hostile input (npm run test:fuzz): fast-check generates bad events (wrong types, huge numbers,
 * NaN-like strings, reversed bounds, mixed domains, deep or huge JSON, lone surrogates, invalid
 * UTF-8, SQL-looking strings) and good ones (hostile names and unknown fields included), sent
 * through the events queue and through POST /v1/events to one daemon process. Every bad one must
 * be dead-lettered (by job id) or answered 400 with a reason; every good one must be in the index;
 * the process must stay up with no failed job. Also: writes without or with a wrong token are
 * refused (401/403) and oversize bodies 413.
 *
 * FUZZ_SEED, FUZZ_BAD (default 10,400 bad events: 6,600 by queue, 3,800 by HTTP), FUZZ_GOOD
 * (default 3,600 good ones).
 */

const procs = processHarness();
const SEED = seedFromEnv('FUZZ_SEED');
const BAD = intFromEnv('FUZZ_BAD', 10_400);
const GOOD = intFromEnv('FUZZ_GOOD', 3_600);
const PREFIX = 'fuzz';
const MAX_PAYLOAD = 65_536;
const BODY_LIMIT = 1_048_576;

const db = await createTestDatabase();
const redis = await RedisServer.start();
afterAll(() => redis.destroy());

// ---------------------------------------------------------------- arbitraries

/** What a bad case is expected to be refused for (for the report; any refusal with a reason counts). */
interface Case {
  readonly good: boolean;
  readonly category: string;
  /** Job data (queue) or parsed body (HTTP). */
  readonly data: unknown;
  /** For HTTP only: a raw body to send instead of JSON.stringify(data). */
  readonly raw?: Buffer;
  /** Good completions: where the event must land. */
  readonly asset?: string;
}

const SQLISH = [
  "'; drop table events; --",
  '" or 1=1 --',
  "x'); delete from segments where ('1'='1",
  '$$; truncate assets; $$',
  '\\x00\\x27',
  '%s%s%s%n',
  '{{7*7}}',
  '<script>alert(1)</script>',
  'Robert"); DROP TABLE Students;--',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a hostile string, not a template
  '${jndi:ldap://127.0.0.1/a}',
  '🙂 ünïcödé ✓ 漢字',
  ' leading and trailing ',
];
const NANISH = [
  'NaN',
  '-NaN',
  'Infinity',
  '-Infinity',
  '1e5',
  '0x1F',
  '1_000',
  '١٢٣',
  '+-1',
  '--1',
  '',
  ' ',
  'null',
  'undefined',
  'true',
  '2025-13-01T00:00:00Z',
  '2025-02-30T00:00:00Z',
  '2025-06-01T24:61:00Z',
  '2025-06-01T00:00:00.0000001Z',
  '2025-06-01T00:00:00+25:00',
  '20250601T000000Z',
  'now',
  '1.5',
  '.5',
];

const hostile = fc.constantFrom(...SQLISH);
/** Well-formed text PostgreSQL can store (no NUL, no lone surrogate, no control characters). */
const printable = fc
  .string({ unit: 'grapheme', minLength: 1, maxLength: 24 })
  // biome-ignore lint/suspicious/noControlCharactersInRegex: keeping control characters out is the point
  .filter((s) => s.isWellFormed() && !/[\u0000-\u001f\u007f]/.test(s) && s.trim().length > 0);
const safeJson = fc.jsonValue({ maxDepth: 3 }).filter((v) => storable(v));
/**
 * Unknown top-level fields are ignored, whatever they are called: `__proto__` and `constructor`
 * are data on every path (HTTP included), like any other key.
 */
const unknownFields = fc.dictionary(
  fc.constantFrom(
    'foo',
    'bar',
    'spark_app',
    'partition',
    'nested',
    'Start',
    'END',
    '__proto__',
    'constructor',
  ),
  safeJson,
  { maxKeys: 3 },
);

let counter = 0;
const uid = () => `${SEED}-${counter++}`;
const MINUTE = 60_000;
const iso = (ms: number) => new Date(ms).toISOString();
const T0 = Date.UTC(2025, 5, 1);

/** Good completions and requirements, in every accepted spelling, with hostile names. */
function goodArb(via: 'q' | 'h'): fc.Arbitrary<Case> {
  const assetName = (domain: 'i' | 't') =>
    fc.tuple(fc.oneof(hostile, printable), fc.nat(19)).map(([s, n]) => `fz.${domain}.${n}.${s}`.trim());
  const id = fc.oneof(fc.constant(''), hostile, printable).map((s) => `${via}-${uid()}${s}`);
  const version = fc.option(fc.oneof(hostile, printable, fc.constant('v1')), { nil: undefined });
  const time = fc
    .record({
      asset: assetName('t'),
      startMin: fc.nat(500_000),
      width: fc.nat(240),
      spelling: fc.constantFrom(
        'Z',
        '+00:00',
        '+0000',
        '+00',
        '.000000Z',
        'interval',
        'duration',
        'partition_key',
        'extra',
      ),
      id,
      version,
      more: unknownFields,
      extra: fc.dictionary(fc.constantFrom('a', 'b', 'c'), safeJson, { maxKeys: 2 }),
    })
    .map((r): Case => {
      const s = T0 + r.startMin * MINUTE;
      const e = s + r.width * MINUTE;
      const text = (ms: number) => {
        const base = iso(ms).slice(0, 19);
        return r.spelling === 'Z' || r.spelling.startsWith('+') || r.spelling === '.000000Z'
          ? `${base}${r.spelling === '.000000Z' ? '.000000Z' : r.spelling}`
          : `${base}Z`;
      };
      const bounds: Record<string, unknown> =
        r.spelling === 'interval'
          ? { interval: `${text(s)}/${text(e)}` }
          : r.spelling === 'duration' && r.width > 0
            ? { interval: `${text(s)}/PT${r.width}M` }
            : r.spelling === 'partition_key'
              ? { partition_key: `${text(s)}/${text(e)}` }
              : r.spelling === 'extra'
                ? { extra: { ...r.extra, interval_start: text(s), interval_end: text(e) } }
                : { start: text(s), end: text(e) };
      const data = {
        ...r.more,
        extra: r.extra,
        ...bounds,
        asset: r.asset,
        id: r.id,
        ...(r.version !== undefined ? { version: r.version } : {}),
      };
      return { good: true, category: `good_time_${r.spelling}`, data, asset: r.asset };
    });
  const integer = fc
    .record({
      asset: assetName('i'),
      start: fc.integer({ min: -1e12, max: 1e12 }),
      width: fc.nat(1_000_000),
      asString: fc.boolean(),
      id,
      version,
      more: unknownFields,
    })
    .map((r): Case => {
      const end = r.start + r.width;
      const data = {
        ...r.more,
        asset: r.asset,
        start: r.asString ? ` ${r.start} ` : r.start,
        end: r.asString ? String(end) : end,
        id: r.id,
        ...(r.version !== undefined ? { version: r.version } : {}),
      };
      return { good: true, category: 'good_integer', data, asset: r.asset };
    });
  const requirement = fc
    .record({ asset: assetName('i'), start: fc.nat(1e9), width: fc.integer({ min: 1, max: 1e6 }), id })
    .map(
      (r): Case => ({
        good: true,
        category: 'good_replay_requirement',
        data: {
          type: 'replay_requirement',
          asset: r.asset,
          start: r.start,
          end: r.start + r.width,
          version: 'v9',
          id: r.id,
        },
        asset: r.asset,
      }),
    );
  // Prototype-named keys written out as JSON text, as a producer that never built a JS object sends them.
  const protoKeys = fc
    .constantFrom('{"__proto__": {"polluted": true}', '{"constructor": {"prototype": {"polluted": true}}')
    .map((prefix): Case => {
      const data = { asset: 'fz.i.proto', id: `${via}-${uid()}` };
      const text = `${prefix}, "asset": "${data.asset}", "start": 1, "end": 2, "id": "${data.id}"}`;
      // By queue, JSON.parse's object (own keys, as BullMQ's worker sees them); by HTTP, the text.
      return via === 'q'
        ? { good: true, category: 'good_proto_keys', data: JSON.parse(text), asset: data.asset }
        : { good: true, category: 'good_proto_keys', data, raw: Buffer.from(text), asset: data.asset };
    });
  return fc.oneof(
    { arbitrary: time, weight: 4 },
    { arbitrary: integer, weight: 4 },
    { arbitrary: requirement, weight: 1 },
    { arbitrary: protoKeys, weight: 1 },
  );
}

/** A valid base event that each bad case breaks in one way. */
const base = () => ({ asset: `fz.i.base`, start: 10, end: 20, id: `bad-${uid()}` });

function badArb(via: 'q' | 'h'): fc.Arbitrary<Case> {
  const bad = (category: string, arb: fc.Arbitrary<unknown>) =>
    arb.map((data): Case => ({ good: false, category, data }));
  const cases: Array<fc.Arbitrary<Case>> = [
    bad(
      'not_an_object',
      fc.oneof(
        fc.array(fc.integer(), { maxLength: 3 }),
        fc.integer(),
        fc.boolean(),
        fc.constant('just text'),
      ),
    ),
    bad(
      'asset_wrong_type',
      fc
        .oneof(fc.integer(), fc.boolean(), fc.array(fc.string()), fc.object({ maxDepth: 1 }))
        .map((asset) => ({ ...base(), asset })),
    ),
    bad(
      'asset_missing',
      fc.constant(null).map(() => ({ start: 1, end: 2, id: `bad-${uid()}` })),
    ),
    bad(
      'asset_unprintable',
      fc
        .constantFrom(
          'a\u0000b',
          'tab\there',
          'new\nline',
          '\u007f',
          'x\ud800',
          '\udc00y',
          ' ',
          'x'.repeat(513),
        )
        .map((asset) => ({ ...base(), asset })),
    ),
    bad(
      'bound_wrong_type',
      fc
        .tuple(
          fc.oneof(fc.boolean(), fc.object({ maxDepth: 1 }), fc.array(fc.nat()), fc.constant(null)),
          fc.boolean(),
        )
        .map(([v, which]) => ({ ...base(), [which ? 'start' : 'end']: v })),
    ),
    bad(
      'bound_nan_like',
      fc
        .tuple(fc.constantFrom(...NANISH), fc.boolean())
        .map(([v, which]) => ({ ...base(), [which ? 'start' : 'end']: v })),
    ),
    bad(
      'bound_huge_number',
      fc
        .tuple(
          fc.oneof(
            fc.constantFrom(
              2 ** 53,
              -(2 ** 53) - 2,
              1e300,
              -1e300,
              2 ** 63,
              '99999999999999999999',
              '-9007199254740993',
              '3000-01-01T00:00:00Z',
              '1500-01-01T00:00:00Z',
            ),
            fc.double({ noInteger: true, noDefaultInfinity: true, noNaN: true }),
          ),
          fc.boolean(),
        )
        .map(([v, which]) => ({
          ...base(),
          asset: typeof v === 'string' && v.includes('T') ? 'fz.t.base' : 'fz.i.base',
          [which ? 'start' : 'end']: v,
        })),
    ),
    bad(
      'missing_bounds',
      fc.constantFrom('start', 'end', 'both').map((w) => {
        const e: Record<string, unknown> = base();
        if (w !== 'end') delete e.start;
        if (w !== 'start') delete e.end;
        return e;
      }),
    ),
    bad(
      'reversed_bounds',
      fc.oneof(
        fc
          .tuple(fc.integer({ min: -1e12, max: 1e12 }), fc.integer({ min: 1, max: 1e9 }))
          .map(([s, w]) => ({ ...base(), start: s + w, end: s })),
        fc.nat(500_000).map((m) => ({
          ...base(),
          asset: 'fz.t.base',
          start: iso(T0 + (m + 5) * MINUTE),
          end: iso(T0 + m * MINUTE),
        })),
      ),
    ),
    bad(
      'mixed_domain',
      fc
        .tuple(fc.nat(1e9), fc.boolean())
        .map(([n, flip]) => ({ ...base(), start: flip ? n : iso(T0), end: flip ? iso(T0) : n })),
    ),
    bad(
      'domain_mismatch_declared',
      fc.oneof(
        fc.nat(1e9).map((n) => ({ ...base(), asset: 'fz.declared.time', start: n, end: n + 1 })),
        fc.nat(1e5).map((m) => ({
          ...base(),
          asset: 'fz.declared.int',
          start: iso(T0 + m * MINUTE),
          end: iso(T0 + (m + 1) * MINUTE),
        })),
      ),
    ),
    bad(
      'bad_interval',
      fc
        .constantFrom(
          'a/b/c',
          '/',
          'x',
          `${iso(T0)}/`,
          `/${iso(T0)}`,
          `${iso(T0)}/PXYZ`,
          `${iso(T0)}/PT0S`,
          `${iso(T0)}/P`,
          `${iso(T0)}/-PT5M`,
          '5/PT5M',
          42,
          ['a', 'b'],
        )
        .map((interval) => ({ asset: 'fz.t.base', interval, id: `bad-${uid()}` })),
    ),
    bad(
      'known_field_wrong_type',
      fc
        .oneof(
          fc.record({
            version: fc.oneof(
              fc.object({ maxDepth: 1 }),
              fc.boolean(),
              fc.constant('v'.repeat(300)),
              fc.constant('v\u0000'),
              fc.constant('v\ud800'),
            ),
          }),
          fc.record({
            id: fc.oneof(
              fc.double({ noInteger: true, noNaN: true, noDefaultInfinity: true }),
              fc.object({ maxDepth: 1 }),
              fc.constant('id\ndup'),
              fc.constant('\udfff'),
            ),
          }),
          fc.record({ produced_at: fc.oneof(fc.constantFrom('yesterday', '2025-02-30', 12), fc.boolean()) }),
          fc.record({ extra: fc.oneof(fc.array(fc.nat()), fc.string(), fc.integer(), fc.boolean()) }),
        )
        .map((f) => ({ ...base(), ...f })),
    ),
    bad(
      'requirement_without_version',
      fc.constant(null).map(() => ({ ...base(), type: 'replay_requirement' })),
    ),
    bad(
      'unknown_type',
      fc
        .oneof(
          fc.constantFrom('deletion', 'Completion', 'REPLAY_REQUIREMENT', ''),
          fc.integer(),
          fc.boolean(),
        )
        .map((type) => ({ ...base(), type })),
    ),
    bad(
      'extra_unstorable_text',
      fc
        .constantFrom('\u0000', 'a\u0000b', '\ud800', 'x\udfffy', '\udbff')
        .chain((s) => fc.constantFrom({ text: s }, { [s]: 1 }, { nested: [{ deep: s }] }))
        .map((extra) => ({ ...base(), extra })),
    ),
    // Deep JSON travels as text (a job whose data is a JSON string, or a raw HTTP body): no
    // serialiser on the sending side has to survive the depth.
    fc
      .tuple(fc.integer({ min: 100, max: 9000 }), fc.boolean(), fc.boolean())
      .map(([depth, arrays, withId]): Case => {
        const n = Number(uid().split('-')[1]);
        const head = JSON.stringify({
          asset: 'fz.i.base',
          start: n * 10,
          end: n * 10 + 5,
          ...(withId ? { id: `bad-${SEED}-${n}` } : {}),
        });
        const nested = `${(arrays ? '[' : '{"d":').repeat(depth)}1${(arrays ? ']' : '}').repeat(depth)}`;
        const text = `${head.slice(0, -1)},"extra":{"root":${nested}}}`;
        return { good: false, category: 'extra_too_deep', data: text, raw: Buffer.from(text) };
      }),
    bad(
      'oversize',
      fc
        .integer({ min: MAX_PAYLOAD, max: 3 * MAX_PAYLOAD })
        .map((n) => ({ ...base(), extra: { blob: 'x'.repeat(n) } })),
    ),
    bad(
      'sql_in_bounds',
      fc.tuple(hostile, fc.boolean()).map(([s, which]) => ({ ...base(), [which ? 'start' : 'end']: s })),
    ),
  ];
  if (via === 'q') {
    cases.push(
      bad(
        'invalid_json_text',
        fc.constantFrom(
          '{"asset": "x", "start": 1,',
          'not json',
          '{"asset":"x","start":1e400,"end":5}',
          "{'a': 1}",
          '[1,2',
          '{"a":NaN}',
        ),
      ),
    );
  } else {
    // Invalid UTF-8 inside a JSON body: bytes no decoder may silently repair.
    cases.push(
      fc
        .tuple(
          fc.constantFrom(
            Buffer.from([0xff]),
            Buffer.from([0xc3, 0x28]),
            Buffer.from([0xed, 0xa0, 0x80]),
            Buffer.from([0xf8, 0x88, 0x80, 0x80, 0x80]),
          ),
          fc.constantFrom('asset', 'id', 'version'),
        )
        .map(([bytes, field]): Case => {
          const e: Record<string, unknown> = {
            asset: 'fz.i.utf8',
            start: 1,
            end: 2,
            id: `bad-${uid()}`,
            version: 'v1',
          };
          const marker = `@@${field}@@`;
          e[field] = `${String(e[field])}${marker}`;
          const text = JSON.stringify(e);
          const at = text.indexOf(marker);
          const raw = Buffer.concat([
            Buffer.from(text.slice(0, at)),
            bytes,
            Buffer.from(text.slice(at + marker.length)),
          ]);
          return { good: false, category: 'invalid_utf8', data: null, raw };
        }),
      bad(
        'invalid_json_body',
        fc.constantFrom('{"asset": "x", "start": 1,', 'not json', '{"a":NaN}', "{'a': 1}"),
      ).map((c) => ({ ...c, raw: Buffer.from(c.data as string) })),
    );
  }
  return fc.oneof(...cases);
}

function storable(v: unknown): boolean {
  if (typeof v === 'string') return v.isWellFormed() && !v.includes('\u0000');
  if (Array.isArray(v)) return v.every(storable);
  if (v !== null && typeof v === 'object')
    return Object.entries(v).every(([k, x]) => storable(k) && storable(x));
  return true;
}

// ---------------------------------------------------------------- the run

describe('hostile input', () => {
  it('dead-letters or refuses every bad event, ingests every good one, and stays up', async () => {
    const started = Date.now();
    const random = prng(SEED);
    const sample = <T>(arb: fc.Arbitrary<T>, n: number, salt: number) =>
      fc.sample(arb, { numRuns: n, seed: SEED + salt });
    const queueBad = Math.round(BAD * 0.635);
    const httpBad = BAD - queueBad;
    const queueGood = Math.round(GOOD * 0.7);
    const httpGood = GOOD - queueGood;
    const queueCases = shuffle(
      [...sample(badArb('q'), queueBad, 1), ...sample(goodArb('q'), queueGood, 2)],
      random,
    );
    const httpCases = shuffle(
      [...sample(badArb('h'), httpBad, 3), ...sample(goodArb('h'), httpGood, 4)],
      random,
    );

    const proc = await procs.spawn({
      name: 'fuzz',
      config: daemonConfig({
        databaseUrl: db.url,
        redisUrl: redis.url,
        prefix: PREFIX,
        logLevel: 'info',
        queue: { max_payload_bytes: MAX_PAYLOAD },
        assets: [
          { name: 'fz.declared.time', domain: 'time' },
          { name: 'fz.declared.int', domain: 'integer' },
        ],
      }),
      readyTimeout: 60_000,
    });
    const url = proc.url!;
    const sql = connect(db.url, { max: 4, applicationName: 'fuzz-checker' });

    // ---- through the queue ----
    const producer = new Producer(redis.url, 'asset-events', PREFIX);
    const jobIds = queueCases.map((_, i) => `fz-q-${i}`);
    for (let i = 0; i < queueCases.length; i += 200) {
      await producer.add(
        queueCases.slice(i, i + 200).map((c, k) => ({ jobId: jobIds[i + k]!, data: c.data as never })),
      );
    }

    // ---- through HTTP, 16 requests at a time ----
    const http: Array<{ status: number; body: Record<string, unknown> | null }> = new Array(httpCases.length);
    let next = 0;
    const post = async (body: Buffer | string, headers: Record<string, string> = {}) => {
      const response = await fetch(`${url}/v1/events`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}`, ...headers },
        body,
      });
      const text = await response.text();
      let parsed: Record<string, unknown> | null = null;
      try {
        parsed = JSON.parse(text) as Record<string, unknown>;
      } catch {
        parsed = null;
      }
      return { status: response.status, body: parsed };
    };
    /**
     * A body over the limit: the server answers 413 from Content-Length and closes the connection
     * without reading the rest, so the client may fail its upload (EPIPE, reset) before it reads
     * the answer. Either is the server refusing it; anything else is not.
     */
    const refusedSize = async (body: Buffer | string): Promise<number> => {
      try {
        return (await post(body)).status;
      } catch (error) {
        const code = ((error as Error).cause as { code?: string } | undefined)?.code;
        if (code === 'EPIPE' || code === 'ECONNRESET') return 413;
        throw error;
      }
    };
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < httpCases.length) {
          const i = next++;
          const c = httpCases[i]!;
          http[i] = await post(c.raw ?? JSON.stringify(c.data));
        }
      }),
    );

    // ---- auth and size ----
    const one = JSON.stringify({ asset: 'fz.i.auth', start: 1, end: 2, id: 'auth' });
    const auth = {
      no_token: (await post(one, { authorization: '' })).status,
      wrong_token: (await post(one, { authorization: 'Bearer not-the-token-0123456789' })).status,
      basic_scheme: (
        await post(one, { authorization: `Basic ${Buffer.from(`u:${TOKEN}`).toString('base64')}` })
      ).status,
      replay_no_token: (
        await fetch(`${url}/v1/assets/fz.i.auth/replay-requirements`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ start: 1, end: 2, version: 'v2' }),
        })
      ).status,
      oversize_body: await refusedSize(Buffer.alloc(BODY_LIMIT + 1024, 0x20)),
      oversize_array: await refusedSize(
        JSON.stringify(
          Array.from({ length: 20_000 }, (_, i) => ({
            asset: 'fz.i.big',
            start: i,
            end: i + 1,
            id: `big-${i}`,
            pad: 'x'.repeat(40),
          })),
        ),
      ),
    };

    // ---- wait for the queue to drain ----
    const events = new Queue('asset-events', { connection: producer.connection, prefix: PREFIX });
    const dlq = new Queue('asset-events-dead', { connection: producer.connection, prefix: PREFIX });
    const drainStarted = Date.now();
    for (let calm = 0; calm < 3; ) {
      const counts = await queueCounts(events);
      calm = pending(counts) === 0 ? calm + 1 : 0;
      if (Date.now() - drainStarted > 180_000)
        throw new Error(`queue did not drain: ${JSON.stringify(counts)}`);
      await sleep(300);
    }
    const counts = await queueCounts(events);

    // ---- checks: queue path ----
    const queueBadNotDeadLettered: Array<{ category: string; job: string; state?: string; data: unknown }> =
      [];
    const reasons: Record<string, number> = {};
    for (let i = 0; i < queueCases.length; i++) {
      const c = queueCases[i]!;
      if (c.good) continue;
      const dead = await dlq.getJob(deadLetterJobId('asset-events', jobIds[i]!));
      const reason = (dead?.data as { reason?: unknown } | undefined)?.reason;
      if (typeof reason !== 'string') {
        const job = await events.getJob(jobIds[i]!);
        queueBadNotDeadLettered.push({
          category: c.category,
          job: jobIds[i]!,
          state: job ? await job.getState() : 'gone',
          data: clip(c.data),
        });
      } else reasons[`${c.category} -> ${reason}`] = (reasons[`${c.category} -> ${reason}`] ?? 0) + 1;
    }

    // ---- checks: HTTP path ----
    const httpBadAccepted: Array<{ category: string; status: number; body: unknown }> = [];
    const httpGoodRefused: Array<{ category: string; status: number; body: unknown }> = [];
    const statuses: Record<string, number> = {};
    httpCases.forEach((c, i) => {
      const r = http[i]!;
      statuses[`${c.good ? 'good' : 'bad'} ${r.status}`] =
        (statuses[`${c.good ? 'good' : 'bad'} ${r.status}`] ?? 0) + 1;
      if (c.good) {
        if (r.status !== 202) httpGoodRefused.push({ category: c.category, status: r.status, body: r.body });
        return;
      }
      const errors = r.body?.errors as Array<{ reason?: unknown }> | undefined;
      const reason = errors?.[0]?.reason ?? r.body?.code;
      if (r.status !== 400 || typeof reason !== 'string' || typeof r.body?.message !== 'string')
        httpBadAccepted.push({ category: c.category, status: r.status, body: r.body });
      else reasons[`http ${c.category} -> ${reason}`] = (reasons[`http ${c.category} -> ${reason}`] ?? 0) + 1;
    });

    // ---- checks: every good event is in the log, and its range in the index ----
    const goods = [
      ...queueCases.filter((c) => c.good),
      ...httpCases.filter((c, i) => c.good && http[i]!.status === 202),
    ];
    const logged = await sql<{ name: string; event_id: string }[]>`
      select a.name, event_id_text(e.event_id, e.event_id_hex) as event_id from events e join assets a on a.id = e.asset_id`;
    const inLog = new Set(logged.map((r) => `${r.name}\u0000${r.event_id}`));
    const goodMissing = goods
      .filter((c) => {
        const d = c.data as { asset: string; id: string };
        return !inLog.has(`${d.asset.trim()}\u0000${d.id}`);
      })
      .map((c) => ({ category: c.category, data: c.data }));
    const [index] = await sql<{ outside: number; events: number; segments: number; assets: number }[]>`
      with idx as (select asset_id, range_agg(span) as m from segments group by asset_id)
      select
        (select count(*)::int from events e left join idx on idx.asset_id = e.asset_id
          where not e.replay and e.hi > e.lo and not coalesce(idx.m @> int8range(e.lo, e.hi), false)) as outside,
        (select count(*)::int from events) as events,
        (select count(*)::int from segments) as segments,
        (select count(*)::int from assets) as assets`;
    const badInLog = logged.filter((r) => r.event_id?.startsWith('bad-')).length;

    const alive = proc.running;
    const errors = errorLines([proc]);
    const failedJobLines = proc.logs('event job failed').length;
    await producer.close();
    await sql.end({ timeout: 5 });
    const exit = await proc.stop(30_000);

    const expectedAuth = {
      no_token: 401,
      wrong_token: 403,
      basic_scheme: 401,
      replay_no_token: 401,
      oversize_body: 413,
      oversize_array: 413,
    };
    const checks = {
      process_exits_while_running: alive ? 0 : 1,
      fatal_or_error_log_lines: errors.length,
      jobs_failed: counts.failed + failedJobLines,
      queue_bad_not_dead_lettered: queueBadNotDeadLettered.length,
      http_bad_not_answered_400_with_reason: httpBadAccepted.length,
      http_good_refused: httpGoodRefused.length,
      good_events_missing_from_log: goodMissing.length,
      logged_completions_outside_index: index!.outside,
      bad_events_in_log: badInLog,
      auth_or_size_not_refused: Object.entries(expectedAuth).filter(
        ([k, v]) => auth[k as keyof typeof auth] !== v,
      ).length,
      unclean_exit: exit.code === 0 ? 0 : 1,
    };
    const ok = Object.values(checks).every((v) => v === 0);
    report('fuzz', {
      suite: 'test:fuzz',
      ok,
      seed: SEED,
      seconds: round((Date.now() - started) / 1000, 1),
      sent: {
        queue: { bad: queueBad, good: queueGood },
        http: { bad: httpBad, good: httpGood },
        bad_total: BAD,
        good_total: GOOD,
        categories: countBy([...queueCases, ...httpCases].map((c) => c.category)),
      },
      auth_and_size: auth,
      checks,
      details: {
        final_queue_counts: counts,
        dead_letters: (await queueCountsSafe(redis.url)).waiting,
        http_statuses: statuses,
        refusal_reasons: reasons,
        index,
        queue_bad_not_dead_lettered: queueBadNotDeadLettered.slice(0, 10),
        http_bad_accepted: httpBadAccepted.slice(0, 10).map(clip),
        http_good_refused: httpGoodRefused.slice(0, 10).map(clip),
        good_missing: goodMissing.slice(0, 10).map(clip),
        error_lines: errors.slice(0, 10).map((e) => ({ msg: e.line.msg, err: clip(e.line.err) })),
      },
    });
    expect(checks).toEqual(Object.fromEntries(Object.keys(checks).map((k) => [k, 0])));
  });
});

async function queueCountsSafe(redisUrl: string) {
  const p = new Producer(redisUrl, 'asset-events-dead', PREFIX);
  try {
    return await queueCounts(p.queue);
  } finally {
    await p.close();
  }
}

function countBy(values: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}

function clip(value: unknown): unknown {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 400 ? `${text.slice(0, 400)}...` : value;
}
