import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../../src/config/index.js';
import { defineRollups } from '../../../src/config/rollups.js';
import { redactTarget } from '../../../src/targets/secrets.js';

const rollup = (repair: unknown, extra: Record<string, unknown> = {}) => ({
  rollups: [
    {
      id: 'orders_hourly',
      upstream: ['warehouse.orders'],
      every: 'hour',
      begin: '2026-01-01',
      target: { type: 'queue', queue: 'runs' },
      repair,
      ...extra,
    },
  ],
});

describe('repair: in a rollup', () => {
  it('defaults after, every, attempts and limit, and keeps the target', () => {
    const config = parseConfig(rollup({ target: { type: 'queue', queue: 'backfills' } }));
    expect(config.rollups[0]!.repair).toEqual({
      after: 30 * 60_000,
      every: 3_600_000,
      attempts: 5,
      limit: 100,
      target: { type: 'queue', queue: 'backfills' },
    });
  });

  it('is off without it', () => {
    expect(parseConfig(rollup(undefined)).rollups[0]!.repair).toBeUndefined();
  });

  it('takes ISO durations and any target type: webhook, airflow, airflow_asset, dagster', () => {
    const config = parseConfig(
      rollup({
        after: 'PT10M',
        every: 'PT2H',
        attempts: 3,
        limit: 20,
        target: {
          type: 'webhook',
          url: 'https://backfill.example/repair',
          headers: { Authorization: { env: 'TOKEN' } },
        },
      }),
    );
    expect(config.rollups[0]!.repair).toMatchObject({
      after: 600_000,
      every: 7_200_000,
      attempts: 3,
      limit: 20,
    });
    expect(
      parseConfig(
        rollup({ target: { type: 'airflow', url: 'http://airflow:8080', dag_id: 'orders_backfill' } }),
      ).rollups[0]!.repair!.target.type,
    ).toBe('airflow');
    expect(
      parseConfig(
        rollup({ target: { type: 'airflow_asset', url: 'http://airflow:8080', asset: 'orders_repairs' } }),
      ).rollups[0]!.repair!.target.type,
    ).toBe('airflow_asset');
    expect(
      parseConfig(
        rollup({ target: { type: 'dagster', url: 'http://dagster:3000', asset_key: 'warehouse/repairs' } }),
      ).rollups[0]!.repair!.target,
    ).toMatchObject({ type: 'dagster', asset_key: ['warehouse', 'repairs'] });
  });

  it.each([
    [
      { target: { type: 'queue', queue: 'b' }, every: 'PT0.5S' },
      'rollups[orders_hourly].repair.every: must be at least PT1S',
    ],
    [{ target: { type: 'queue', queue: 'b' }, after: 'soon' }, 'rollups[orders_hourly].repair.after'],
    [{ target: { type: 'queue', queue: 'b' }, attempts: 0 }, 'rollups[orders_hourly].repair.attempts'],
    [{ target: { type: 'queue', queue: 'b' }, limit: 5000 }, 'rollups[orders_hourly].repair.limit'],
    [{ target: { type: 'queue', queue: 'b' }, every_so_often: 'PT1H' }, 'every_so_often'],
    [{}, 'rollups[orders_hourly].repair.target'],
    [{ target: { type: 'webhook', url: 'ftp://x' } }, 'rollups[orders_hourly].repair.target.url'],
    [
      {
        target: {
          type: 'airflow_asset',
          url: 'http://airflow:8080',
          asset: 'orders_repairs',
          follow_dag_id: 'orders_backfill',
        },
      },
      'rollups[orders_hourly].repair.target.follow_dag_id: a repair request is followed by what the index then covers',
    ],
    [
      {
        target: {
          type: 'dagster',
          url: 'http://dagster:3000',
          asset_key: 'warehouse/repairs',
          partition_format: 'yyyy-MM-dd',
        },
      },
      'rollups[orders_hourly].repair.target.partition_format: a repair request is an observation of the asset',
    ],
  ])('refuses %j, naming the field', (repair, message) => {
    expect(() => parseConfig(rollup(repair))).toThrow(ConfigError);
    expect(() => parseConfig(rollup(repair))).toThrow(message);
  });

  it('needs a time rollup: integer periods have no end in time to wait `after`', () => {
    const config = parseConfig(
      rollup({ target: { type: 'queue', queue: 'b' } }, { every: 100, begin: 0, upstream: ['offsets'] }),
    );
    expect(() => defineRollups(config)).toThrow(/rollups\[orders_hourly\]\.repair: .*time rollup/);
  });

  it('keeps no literal secret of a repair target where rollup definitions are stored', () => {
    const config = parseConfig(
      rollup({
        target: {
          type: 'webhook',
          url: 'https://b.example/r',
          headers: { Authorization: 'Bearer s3cret-value' },
        },
      }),
    );
    expect(JSON.stringify(redactTarget(config.rollups[0]!.repair!.target))).not.toContain('s3cret');
  });
});
