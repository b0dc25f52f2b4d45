import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../src/config/index.js';
import { defineRollups } from '../../src/config/rollups.js';
import type { TriggerPayload } from '../../src/core/trigger.js';
import {
  DATA_VERSION_TAG,
  type DagsterConfig,
  dagsterTarget,
  LOOKUP_LIMIT,
  materializationBody,
  partitionKey,
  reportPath,
} from '../../src/targets/dagster.js';

/**
 * The dagster target's requests, against a recorder that answers as Dagster's webserver
 * does (GraphQL look-up, then the report endpoint). test/real/dagster.real.test.ts proves the same
 * against a real dagster-webserver.
 */

interface Seen {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: Record<string, unknown>;
}
const seen: Seen[] = [];
/** What the recorder's GraphQL answers: the materializations it holds, as Dagster lists them. */
let held: Array<{ partition: string | null; tags: Array<{ key: string; value: string }> }> = [];
let reportStatus = 200;
const server = createServer((req, res) => {
  let text = '';
  req.setEncoding('utf8');
  req.on('data', (c: string) => {
    text += c;
  });
  req.on('end', () => {
    const body = text ? (JSON.parse(text) as Record<string, unknown>) : {};
    seen.push({ method: req.method!, path: req.url!, headers: req.headers, body });
    res.setHeader('content-type', 'application/json');
    if (req.url === '/dagster/graphql') {
      const partitions = (body.variables as { partitions: string[] }).partitions;
      const list = held.filter((m) => m.partition !== null && partitions.includes(m.partition));
      res.end(
        JSON.stringify({ data: { assetOrError: { __typename: 'Asset', assetMaterializations: list } } }),
      );
      return;
    }
    res.statusCode = reportStatus;
    res.end(
      reportStatus === 200 ? '{}' : JSON.stringify({ error: 'Not authorized, token abcd-secret-1234' }),
    );
  });
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/dagster/`;
afterAll(() => new Promise((resolve) => server.close(resolve)));
beforeEach(() => {
  seen.length = 0;
  held = [];
  reportStatus = 200;
});

function payload(generation = 1, attempt = 1): TriggerPayload {
  return {
    rollup: 'orders_hourly',
    idempotency_key: `orders_hourly@20261102T100000Z#${generation}`,
    generation,
    reason: generation === 1 ? 'covered' : 'replay',
    period: { start: '2026-11-02T11:00:00+01:00', end: '2026-11-02T12:00:00+01:00', key: '2026-11-02T11' },
    upstreams: { 'warehouse.orders': { ratio: 1, missing: [], replay_required: [], versions: ['v1'] } },
    decided_at: '2026-11-02T11:03:00.000Z',
    attempt,
    run_id: attempt === 1 ? `orders_hourly@20261102T100000Z#${generation}` : `x~a${attempt}`,
  };
}

const config = (extra: Partial<DagsterConfig> = {}): DagsterConfig => ({
  url,
  asset_key: ['warehouse', 'orders hourly'],
  headers: {},
  timeout: 5000,
  ...extra,
});

describe('dagster target: the request', () => {
  it('names the period key as the partition, {rollup}#{generation} as the data version, and the coverage as metadata', () => {
    const body = materializationBody(payload(2), undefined);
    expect(body).toMatchObject({
      partition: '2026-11-02T11',
      data_version: 'orders_hourly#2',
      metadata: {
        rollup: 'orders_hourly',
        generation: 2,
        reason: 'replay',
        idempotency_key: 'orders_hourly@20261102T100000Z#2',
        period_start: '2026-11-02T11:00:00+01:00',
        upstreams: { 'warehouse.orders': { ratio: 1, versions: ['v1'] } },
      },
    });
    // No null anywhere: Dagster refuses a null metadata value.
    expect(JSON.stringify(body)).not.toContain('null');
  });

  it('formats the period start in the rollup zone with partition_format, as Dagster partitions are keyed', () => {
    expect(partitionKey(payload(), 'yyyy-MM-dd-HH:mm')).toBe('2026-11-02-11:00');
    expect(partitionKey(payload(), undefined)).toBe('2026-11-02T11');
    const integer = {
      ...payload(),
      period: { start: 4096, end: 4106, key: '4096' },
    } as unknown as TriggerPayload;
    expect(partitionKey(integer, 'yyyy')).toBe('4096');
  });

  it('puts the asset key parts in the path, each URL-encoded', () => {
    expect(reportPath(['warehouse', 'orders hourly'])).toBe(
      '/report_asset_materialization/warehouse/orders%20hourly',
    );
  });

  it('looks the data version up, then posts application/json exactly, with the Dagster+ token', async () => {
    const target = dagsterTarget(
      config({ token: 'cloud-token-0123', headers: { 'X-Extra': 'x', 'Content-Type': 'text/plain' } }),
    );
    expect(await target.deliver(payload())).toEqual({ ok: true });
    const [lookup, report, ...more] = seen;
    expect(more).toEqual([]);
    expect(lookup).toMatchObject({ method: 'POST', path: '/dagster/graphql' });
    expect(lookup!.body.variables).toEqual({
      assetKey: { path: ['warehouse', 'orders hourly'] },
      partitions: ['2026-11-02T11'],
      limit: LOOKUP_LIMIT,
    });
    expect(report).toMatchObject({
      method: 'POST',
      path: '/dagster/report_asset_materialization/warehouse/orders%20hourly',
    });
    expect(report!.headers['content-type']).toBe('application/json');
    expect(report!.headers['dagster-cloud-api-token']).toBe('cloud-token-0123');
    expect(report!.headers['x-extra']).toBe('x');
    expect(report!.body).toEqual(JSON.parse(JSON.stringify(materializationBody(payload(), undefined))));
  });

  it('posts nothing when Dagster already holds that data version for the partition (a redelivery)', async () => {
    held = [
      { partition: '2026-11-02T11', tags: [{ key: DATA_VERSION_TAG, value: 'orders_hourly#1' }] },
      { partition: '2026-11-02T10', tags: [{ key: DATA_VERSION_TAG, value: 'orders_hourly#2' }] },
    ];
    const target = dagsterTarget(config());
    expect(await target.deliver(payload(1, 2))).toEqual({ ok: true });
    expect(seen.map((s) => s.path)).toEqual(['/dagster/graphql']);
    // Generation 2 of this partition is another data version: posted.
    seen.length = 0;
    expect(await target.deliver(payload(2))).toEqual({ ok: true });
    expect(seen.map((s) => s.path)).toEqual([
      '/dagster/graphql',
      '/dagster/report_asset_materialization/warehouse/orders%20hourly',
    ]);
  });

  it('observes a run as succeeded once Dagster holds its data version, lost when it does not', async () => {
    const target = dagsterTarget(config());
    held = [{ partition: '2026-11-02T11', tags: [{ key: DATA_VERSION_TAG, value: 'orders_hourly#1' }] }];
    const answer = await target.observe!([
      { runId: 'a', payload: payload(1) },
      { runId: 'b', payload: payload(2) },
    ]);
    expect(answer).toEqual(
      new Map([
        ['a', { kind: 'target', state: 'succeeded' }],
        ['b', expect.objectContaining({ kind: 'target', state: 'lost' })],
      ]),
    );
  });

  it('retries a refused token and keeps the token out of the error', async () => {
    reportStatus = 401;
    const target = dagsterTarget(config({ token: 'abcd-secret-1234' }));
    const result = await target.deliver(payload());
    expect(result).toMatchObject({ ok: false, retry: true });
    expect(JSON.stringify(result)).not.toContain('abcd-secret-1234');
  });
});

describe('dagster target: config', () => {
  const rollup = (target: Record<string, unknown>, every: unknown = 'hour') => ({
    rollups: [{ id: 'r', upstream: ['a'], every, begin: every === 'hour' ? '2026-11-01' : 0, target }],
  });

  it('takes the asset key as a string with / or as parts', () => {
    const a = parseConfig(rollup({ type: 'dagster', url: 'http://d:3000', asset_key: 'warehouse/orders' }));
    const b = parseConfig(
      rollup({ type: 'dagster', url: 'http://d:3000', asset_key: ['warehouse', 'orders'] }),
    );
    expect(a.rollups[0]!.target).toEqual(b.rollups[0]!.target);
    expect(a.rollups[0]!.target).toMatchObject({ asset_key: ['warehouse', 'orders'], timeout: 10_000 });
  });

  it('says what is wrong', () => {
    expect(() => parseConfig(rollup({ type: 'dagster', url: 'http://d:3000', asset_key: 'a//b' }))).toThrow(
      /asset_key: expected non-empty key parts/,
    );
    expect(() => parseConfig(rollup({ type: 'dagster', url: 'http://d:3000' }))).toThrow(/asset_key/);
    expect(() =>
      parseConfig(rollup({ type: 'dagster', url: 'http://d:3000', asset_key: 'a', token: '' })),
    ).toThrow(ConfigError);
    const integer = parseConfig(
      rollup({ type: 'dagster', url: 'http://d:3000', asset_key: 'a', partition_format: 'yyyy' }, 10),
    );
    expect(() => defineRollups(integer)).toThrow(
      /target.partition_format: an integer rollup has no period start/,
    );
  });
});
