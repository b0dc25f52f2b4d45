import { DateTime } from 'luxon';
import type { TriggerPayload } from '../../core/runs/trigger.js';

/**
 * Airflow partition keys for a period. Airflow's temporal partition mappers
 * (`StartOfHourMapper`, `StartOfDayMapper`, ... in airflow/partition_mappers/temporal.py) and
 * `CronPartitionTimetable` read an upstream key with `strptime(key, input_format)`, default
 * `%Y-%m-%dT%H:%M:%S`, as wall-clock time in their `timezone`. So the key is the period start
 * formatted the same way, as wall-clock time in a zone: the rollup's by default.
 */
export const DEFAULT_PARTITION_FORMAT = '%Y-%m-%dT%H:%M:%S';

/** The strftime directives supported, as luxon renders them (ISO week fields for %V/%G/%u). */
const DIRECTIVES: Record<string, (t: DateTime) => string> = {
  Y: (t) => String(t.year).padStart(4, '0'),
  y: (t) => String(t.year % 100).padStart(2, '0'),
  m: (t) => String(t.month).padStart(2, '0'),
  d: (t) => String(t.day).padStart(2, '0'),
  H: (t) => String(t.hour).padStart(2, '0'),
  M: (t) => String(t.minute).padStart(2, '0'),
  S: (t) => String(t.second).padStart(2, '0'),
  j: (t) => String(t.ordinal).padStart(3, '0'),
  V: (t) => String(t.weekNumber).padStart(2, '0'),
  G: (t) => String(t.weekYear).padStart(4, '0'),
  u: (t) => String(t.weekday),
  '%': () => '%',
};

/** The first directive of `format` this formatter does not know, if any (for config validation). */
export function unsupportedDirective(format: string): string | undefined {
  for (let i = 0; i < format.length; i++) {
    if (format[i] !== '%') continue;
    const d = format[i + 1];
    if (d === undefined || !(d in DIRECTIVES)) return `%${d ?? ''}`;
    i++;
  }
  return undefined;
}

/** How a target keys a period: its zone (UTC when unset) and its format (the default when unset). */
export interface PartitionKeyConfig {
  readonly partition_timezone?: string | undefined;
  readonly partition_key_format?: string | undefined;
}

/** The partition key of a decision's period, as `config` keys it. */
export function periodPartitionKey(payload: TriggerPayload, config: PartitionKeyConfig): string {
  return partitionKey(
    String(payload.period.start),
    config.partition_timezone ?? 'UTC',
    config.partition_key_format ?? DEFAULT_PARTITION_FORMAT,
  );
}

/** `start` (an ISO instant) as wall-clock time in `zone`, formatted with strftime `format`. */
export function partitionKey(start: string, zone: string, format = DEFAULT_PARTITION_FORMAT): string {
  const t = DateTime.fromISO(start, { zone: 'UTC' }).setZone(zone);
  if (!t.isValid) throw new Error(`cannot format ${start} in zone ${zone}: ${t.invalidExplanation}`);
  return format.replace(/%(.)/g, (whole, d: string) => DIRECTIVES[d]?.(t) ?? whole);
}
