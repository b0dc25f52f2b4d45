import { createHash } from 'node:crypto';
import { BadInputError } from '../errors.js';
import {
  addIsoDuration,
  type Bound,
  domainOf,
  parseIntegerBound,
  parseTimeBound,
} from '../intervals/bounds.js';
import { nearest } from '../nearest.js';
import type { Rollup } from '../rollups/rollup.js';
import type { Domain } from '../types.js';
import { extraOf } from './event-extra.js';
import { checkPeriodBound } from './period-bound.js';

/** What config says about an asset, when it declares it. */
export interface AssetDeclaration {
  readonly domain?: Domain;
  readonly zone?: string;
}

export interface NormalizeOptions {
  readonly assets?: ReadonlyMap<string, AssetDeclaration>;
  readonly maxPayloadBytes: number;
  /**
   * The rollups reading an asset now (the catalog changes while the daemon runs): an event that
   * would touch more periods of one of them than MAX_PERIODS_PER_EVENT is refused
   * (./period-bound.ts). Absent: no rollup is checked.
   */
  readonly readersOf?: (asset: string) => readonly Rollup[];
}

/** The canonical event every accepted spelling becomes. */
export interface NormalizedEvent {
  readonly kind: 'completion' | 'replay_requirement';
  readonly asset: string;
  readonly domain: Domain;
  /** The zone bounds without an offset were read in; recorded on the asset at first sight. */
  readonly zone: string;
  readonly start: Bound;
  readonly end: Bound;
  readonly version: string | null;
  readonly id: string | null;
  readonly producedAt: string | null;
  readonly extra: Record<string, unknown>;
  /** Idempotency key within the asset: the producer's id, else a hash of the content. */
  readonly key: string;
}

/** An event whose bounds contradict the domain its asset holds (recorded, or declared). */
export function domainMismatch(event: NormalizedEvent, held: Domain): BadInputError {
  return new BadInputError(
    'domain_mismatch',
    `asset ${event.asset} holds ${held} bounds but this event's are ${event.domain}`,
  );
}

/** Characters (code points, as the OpenAPI document's maxLength counts them) of an asset name. */
export const MAX_ASSET_LENGTH = 512;
/** Characters of a version or id given as text. */
export const MAX_TEXT_LENGTH = 256;

/** Whether `text` is longer than `max` characters; code units over-count astral characters. */
function longerThan(text: string, max: number): boolean {
  if (text.length <= max) return false;
  let count = 0;
  for (const _ of text) if (++count > max) return true;
  return false;
}

/** Turns one job's data (any accepted spelling) into a canonical event, or throws BadInputError. */
export function normalizeEvent(raw: unknown, options: NormalizeOptions): NormalizedEvent {
  const data = parseJson(raw, options.maxPayloadBytes);
  const kind = kindOf(data.type);
  const asset = assetOf(data);
  const declared = options.assets?.get(asset);
  const zone = declared?.zone ?? 'UTC';
  const [rawStart, rawEnd, duration] = rawBounds(data);
  const domain = boundsDomain(rawStart, rawEnd, declared?.domain, asset);
  const start =
    domain === 'time' ? parseTimeBound(rawStart, 'start', zone) : parseIntegerBound(rawStart, 'start');
  const end =
    duration !== undefined
      ? addIsoDuration(start, duration, zone)
      : domain === 'time'
        ? parseTimeBound(rawEnd, 'end', zone)
        : parseIntegerBound(rawEnd, 'end');
  if (end.value < start.value) {
    throw new BadInputError('end_before_start', `end ${end.text} is before start ${start.text}`);
  }
  const version = labelOf(data.version, 'version');
  if (kind === 'replay_requirement' && (version === null || version === '')) {
    throw new BadInputError(
      'invalid_field',
      'a replay_requirement needs the "version" the range must be rebuilt at',
    );
  }
  const id = labelOf(data.id, 'id');
  const producedAt = producedAtOf(data);
  const extra = extraOf(data.extra);
  if (options.readersOf) checkPeriodBound({ asset, domain, start, end }, options.readersOf(asset));
  const key =
    id !== null
      ? `id:${id}`
      : `sha256:${contentHash([kind, asset, start.value, end.value, version, producedAt, extra])}`;
  return { kind, asset, domain, zone, start, end, version, id, producedAt, extra, key };
}

function parseJson(raw: unknown, maxBytes: number): Record<string, unknown> {
  let text: string;
  let value: unknown = raw;
  if (typeof raw === 'string') {
    text = raw;
  } else {
    try {
      text = JSON.stringify(raw) ?? '';
    } catch {
      throw new BadInputError('invalid_json', 'the event is not serialisable JSON');
    }
  }
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > maxBytes) {
    throw new BadInputError('payload_too_large', `the event is ${bytes} bytes; the limit is ${maxBytes}`);
  }
  if (typeof raw === 'string') {
    try {
      value = JSON.parse(raw);
    } catch {
      throw new BadInputError('invalid_json', 'the event is a string that does not parse as JSON');
    }
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new BadInputError('invalid_payload', 'an event must be a JSON object');
  }
  return value as Record<string, unknown>;
}

function kindOf(type: unknown): NormalizedEvent['kind'] {
  if (type === undefined || type === null || type === 'completion') return 'completion';
  if (type === 'replay_requirement') return 'replay_requirement';
  throw new BadInputError(
    'unknown_type',
    `unknown event type ${JSON.stringify(type)}; use "completion" (or omit it) or "replay_requirement"`,
  );
}

/** `asset`, else Airflow's `name` or `uri` (AssetEvent JSON), else Airflow 2's `dataset_uri`. */
export function assetOf(data: Record<string, unknown>): string {
  const raw = data.asset ?? data.name ?? data.uri ?? data.asset_uri ?? data.dataset_uri;
  if (raw === undefined || raw === null || raw === '') {
    throw new BadInputError(
      'missing_asset',
      'the event names no asset (set "asset", or Airflow\'s "uri"/"name")',
    );
  }
  if (typeof raw !== 'string') throw new BadInputError('invalid_asset', 'the asset name must be a string');
  const name = raw.trim();
  if (name.length === 0 || longerThan(name, MAX_ASSET_LENGTH) || hasControlChars(name)) {
    throw new BadInputError(
      'invalid_asset',
      `the asset name must be 1-${MAX_ASSET_LENGTH} printable characters without control characters`,
    );
  }
  return name;
}

type RawBounds = [start: unknown, end: unknown, duration: string | undefined];

/** Bounds by precedence: start/end, interval, partition_key, extra.interval_start/interval_end. */
function rawBounds(data: Record<string, unknown>): RawBounds {
  if (data.start !== undefined || data.end !== undefined) {
    if (data.start === undefined || data.end === undefined) {
      const [given, absent] = data.start === undefined ? ['end', 'start'] : ['start', 'end'];
      throw new BadInputError(
        'missing_bounds',
        `the event has "${given}" but no "${absent}"${misspelt(data, absent)}`,
      );
    }
    return [data.start, data.end, undefined];
  }
  if (data.interval !== undefined) return splitInterval(data.interval, 'interval');
  if (typeof data.partition_key === 'string' && data.partition_key.includes('/')) {
    return splitInterval(data.partition_key, 'partition_key');
  }
  const extra = data.extra;
  if (extra !== null && typeof extra === 'object' && !Array.isArray(extra)) {
    const e = extra as Record<string, unknown>;
    if (e.interval_start !== undefined && e.interval_end !== undefined)
      return [e.interval_start, e.interval_end, undefined];
  }
  throw new BadInputError(
    'missing_bounds',
    `the event has no interval: set "start" and "end", "interval", a "partition_key" holding an ISO interval, or extra.interval_start/interval_end${misspelt(data, 'start', 'end', 'interval')}`,
  );
}

/**
 * "; "strat" is not a field (did you mean "start"?)": a misspelt bound is kept as data like any
 * unknown field, so the error names it rather than leave the producer to find it.
 */
function misspelt(data: Record<string, unknown>, ...wanted: string[]): string {
  for (const key of Object.keys(data)) {
    if (wanted.includes(key)) continue;
    const near = nearest(key, wanted);
    if (near !== undefined && data[near] === undefined)
      return `; "${key}" is not a field (did you mean "${near}"?)`;
  }
  return '';
}

function splitInterval(raw: unknown, field: string): RawBounds {
  if (typeof raw !== 'string')
    throw new BadInputError('invalid_interval', `${field} must be a string "start/end"`);
  const parts = raw.split('/');
  if (parts.length !== 2 || !parts[0] || !parts[1]) {
    throw new BadInputError(
      'invalid_interval',
      `${field} "${raw.slice(0, 80)}" is not an ISO 8601 interval (start/end or start/duration)`,
    );
  }
  const [start, end] = parts as [string, string];
  if (/^P/i.test(end.trim())) return [start, undefined, end.trim().toUpperCase()];
  return [start, end, undefined];
}

function boundsDomain(start: unknown, end: unknown, declared: Domain | undefined, asset: string): Domain {
  const startDomain = domainOf(start);
  const endDomain = end === undefined ? startDomain : domainOf(end);
  if (startDomain === null || endDomain === null) {
    const which = startDomain === null ? 'start' : 'end';
    const bad = startDomain === null ? start : end;
    // Let the domain parser produce the precise message.
    if (declared === 'integer') parseIntegerBound(bad, which);
    parseTimeBound(bad, which, 'UTC');
    throw new BadInputError('invalid_bound', `${which} is neither an integer nor an ISO 8601 timestamp`);
  }
  if (startDomain !== endDomain) {
    throw new BadInputError(
      'mixed_domain',
      `start is ${startDomain} but end is ${endDomain}; both must be one domain`,
    );
  }
  if (end === undefined && startDomain !== 'time') {
    throw new BadInputError('invalid_interval', 'a start/duration interval needs a timestamp start');
  }
  if (declared && declared !== startDomain) {
    throw new BadInputError(
      'domain_mismatch',
      `asset ${asset} is declared ${declared} but the event's bounds are ${startDomain}`,
    );
  }
  return startDomain;
}

/** `version` or `id`: absent (or null), a short printable string, or a safe integer kept as its digits. */
function labelOf(raw: unknown, field: 'version' | 'id'): string | null {
  if (raw === undefined || raw === null) return null;
  if (typeof raw === 'number') {
    // A fractional or unsafe number has no one spelling (0.1 + 0.2, 1e21): stored as text it would
    // not be the value sent (1.2345678901234568e+29), and as an id it could key nothing.
    if (Number.isSafeInteger(raw)) return String(raw);
    throw new BadInputError('invalid_field', `${field} must be a string or a safe integer, got ${raw}`);
  }
  if (typeof raw !== 'string' || longerThan(raw, MAX_TEXT_LENGTH) || hasControlChars(raw)) {
    throw new BadInputError(
      'invalid_field',
      `${field} must be a string of at most ${MAX_TEXT_LENGTH} printable characters`,
    );
  }
  return raw;
}

function producedAtOf(data: Record<string, unknown>): string | null {
  const raw = data.produced_at ?? data.timestamp;
  if (raw === undefined || raw === null) return null;
  const field = data.produced_at !== undefined ? 'produced_at' : 'timestamp';
  try {
    parseTimeBound(raw, field, 'UTC');
  } catch (error) {
    if (error instanceof BadInputError) throw new BadInputError('invalid_field', error.message);
    throw error;
  }
  return raw as string;
}

function hasControlChars(text: string): boolean {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
  return /[\u0000-\u001f\u007f]/.test(text) || !text.isWellFormed();
}

/** Key order must not matter for "the same content". */
function contentHash(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex').slice(0, 32);
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
