import { describe, expect, it } from 'vitest';
import { repairPayload } from '../../src/core/repair-payload.js';
import { reportPath } from '../../src/targets/dagster.js';
import { observationBody, observationsRequest } from '../../src/targets/dagster-repair.js';

/**
 * What a repair request sent to Dagster is made of; test/real/dagster.real.test.ts
 * posts it to a real dagster-webserver and reads it back.
 */
const request = (rollup: string | null) =>
  repairPayload({
    id: 7,
    attempt: 1,
    asset: 'warehouse.orders',
    ranges: [{ start: 0, end: 60_000_000, kind: 'missing', requiredVersion: null }],
    rangesTotal: 1,
    missingTotal: 60_000_000,
    rollup,
    period:
      rollup === null
        ? null
        : { start: '1970-01-01T00:00:00Z', end: '1970-01-01T01:00:00Z', key: '1970-01-01T00' },
    format: (p) => new Date(p / 1000).toISOString(),
    unitSeconds: 1e-6,
    requestedAt: new Date('2026-06-01T12:00:00Z'),
  });

describe('a repair request as a Dagster observation', () => {
  it('carries every field of the request as metadata, with no data version', () => {
    const payload = request('orders_hourly');
    const body = observationBody(payload);
    expect(body.metadata).toEqual(payload);
    expect(body).not.toHaveProperty('data_version');
    expect(body).not.toHaveProperty('partition');
    expect(body.description).toBe(
      'coverage-rollup repair request repair-7~a1: 1 range(s) of warehouse.orders, for orders_hourly period 1970-01-01T00',
    );
  });

  it('keeps the null fields of a request made by hand', () => {
    const body = observationBody(request(null));
    expect(body.metadata).toMatchObject({ rollup: null, period: null, idempotency_key: 'repair-7~a1' });
    expect(body.description).toContain('by hand');
  });

  it('is posted to the observation endpoint and looked up since the attempt', () => {
    expect(reportPath(['warehouse', 'orders repairs'], 'observation')).toBe(
      '/report_asset_observation/warehouse/orders%20repairs',
    );
    expect(observationsRequest(['warehouse', 'repairs'], 1_780_000_000_000).variables).toEqual({
      assetKey: { path: ['warehouse', 'repairs'] },
      after: '1780000000000',
      limit: 500,
    });
  });
});
