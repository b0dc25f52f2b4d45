import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../../src/config/index.js';
import { partitionKey, unsupportedDirective } from '../../../../src/targets/airflow/partition-key.js';

describe('Airflow partition keys', () => {
  it('are the period start as wall-clock time in the zone, %Y-%m-%dT%H:%M:%S by default', () => {
    expect(partitionKey('2026-03-29T00:00:00Z', 'UTC')).toBe('2026-03-29T00:00:00');
    // Berlin springs forward at 01:00Z on 2026-03-29: 00:00Z is 01:00 CET, 01:00Z is 03:00 CEST.
    expect(partitionKey('2026-03-29T00:00:00Z', 'Europe/Berlin')).toBe('2026-03-29T01:00:00');
    expect(partitionKey('2026-03-29T01:00:00Z', 'Europe/Berlin')).toBe('2026-03-29T03:00:00');
    // A Berlin day starts at 23:00Z (winter) or 22:00Z (summer) the day before.
    expect(partitionKey('2026-03-28T23:00:00Z', 'Europe/Berlin')).toBe('2026-03-29T00:00:00');
    expect(partitionKey('2026-03-29T22:00:00Z', 'Europe/Berlin')).toBe('2026-03-30T00:00:00');
  });

  it('take other strftime formats: ISO week, date only, literals', () => {
    expect(partitionKey('2026-12-31T10:00:00Z', 'UTC', '%G-W%V-%u')).toBe('2026-W53-4');
    expect(partitionKey('2026-06-01T10:00:00Z', 'UTC', '%Y-%m-%d')).toBe('2026-06-01');
    expect(partitionKey('2026-06-01T10:00:00Z', 'UTC', 'hour=%H %%')).toBe('hour=10 %');
    expect(unsupportedDirective('%Y-%m-%dT%H:%M:%S')).toBeUndefined();
    expect(unsupportedDirective('%Y-%B')).toBe('%B');
    expect(unsupportedDirective('%Y%')).toBe('%');
  });

  it('the airflow target validates partition_key_format and partition_timezone', () => {
    const config = (extra: Record<string, unknown>) => ({
      rollups: [
        {
          id: 'r',
          upstream: ['a'],
          every: 'hour',
          begin: '2025-01-01',
          target: { type: 'airflow', url: 'http://airflow:8080', dag_id: 'd', token: 't', ...extra },
        },
      ],
    });
    expect(() => parseConfig(config({ partition_key_format: '%Y-%b' }))).toThrow(
      'rollups[r].target.partition_key_format: unsupported directive %b',
    );
    expect(() => parseConfig(config({ partition_timezone: 'Mars/Olympus' }))).toThrow(
      'rollups[r].target.partition_timezone: not an IANA time zone',
    );
    expect(() => parseConfig(config({ partitioned: 'yes' }))).toThrow('rollups[r].target.partitioned');
    const target = parseConfig(config({ partitioned: true, partition_timezone: 'Europe/Berlin' })).rollups[0]!
      .target;
    expect(target).toMatchObject({ partitioned: true, partition_timezone: 'Europe/Berlin' });
  });
});
