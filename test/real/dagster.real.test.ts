import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { repairPayload } from '../../src/core/repair-payload.js';
import { attemptPayload, type TriggerPayload } from '../../src/core/trigger.js';
import { Targets } from '../../src/targets/index.js';
import { RepairTargets } from '../../src/targets/repair-targets.js';
import { redactTarget, type StoredTarget } from '../../src/targets/secrets.js';
import { testProducer } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { REDIS_URL } from '../helpers/env.js';
import { freePort } from '../helpers/ports.js';
import { type DaemonProcess, processHarness } from '../helpers/process.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { exampleFile, report } from './helpers/producers.js';
import { SystemProcess, venvBin, waitForHttp } from './helpers/system.js';

/**
 * The dagster target against a real dagster-webserver 1.13 serving
 * examples/dagster/defs.py (an hourly-partitioned external asset warehouse/orders_hourly), with
 * DAGSTER_HOME in a temporary folder. A covered hour becomes one materialization of that asset,
 * partition = the hour in Dagster's key form, data version = `{rollup}#{generation}`, read back
 * over Dagster's GraphQL; a forced redelivery of the same decision adds none; a manual trigger
 * (generation 2) adds the second data version; the run succeeds once Dagster holds it. A repair
 * request becomes one observation of warehouse/orders_repairs per attempt, and the
 * example's sensor turns each into a backfill run request.
 */

const procs = processHarness();
const TOKEN = 'real-dagster-token-0123456789';
const DAY_MS = 86_400_000;
const yesterday = new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS - DAY_MS);
const BEGIN = yesterday.toISOString().slice(0, 10);
const HOUR_START = `${BEGIN}T10:00:00Z`;
const PERIOD_KEY = `${BEGIN}T10`;
const PARTITION = `${BEGIN}-10:00`; // Dagster's HourlyPartitionsDefinition key of that hour
const ASSET_KEY = ['warehouse', 'orders_hourly'];

let dagster: SystemProcess;
let dagsterUrl: string;
let home: string;
let startedMs = 0;

beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'coverage-rollup-dagster-'));
  writeFileSync(join(home, 'dagster.yaml'), 'telemetry:\n  enabled: false\n');
  const port = await freePort();
  dagsterUrl = `http://127.0.0.1:${port}`;
  const started = Date.now();
  dagster = new SystemProcess({
    name: 'dagster-webserver',
    command: venvBin('dagster', 'dagster-webserver'),
    args: ['-f', exampleFile('dagster/defs.py'), '-h', '127.0.0.1', '-p', String(port)],
    env: { DAGSTER_HOME: home },
    cwd: home,
  });
  await waitForHttp(`${dagsterUrl}/server_info`, 240_000, dagster);
  startedMs = Date.now() - started;
});

afterAll(async () => {
  await dagster?.stop();
  if (home) rmSync(home, { recursive: true, force: true });
});

interface Materialization {
  partition: string | null;
  tags: Array<{ key: string; value: string }>;
  metadataEntries: Array<{
    __typename?: string;
    label: string;
    jsonString?: string;
    text?: string;
    intValue?: number;
  }>;
}

async function graphql<T>(query: string, variables: Record<string, unknown>): Promise<T> {
  const response = await fetch(`${dagsterUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query, variables }),
  });
  const answer = (await response.json()) as { data?: T; errors?: unknown[] };
  if (response.status !== 200 || answer.errors) throw new Error(`GraphQL: ${JSON.stringify(answer)}`);
  return answer.data as T;
}

/** Every materialization Dagster holds for our partition of the asset. */
async function materializations(): Promise<Materialization[]> {
  const data = await graphql<{ assetOrError: { assetMaterializations: Materialization[] } }>(
    `query ($key: AssetKeyInput!, $partitions: [String!]) {
      assetOrError(assetKey: $key) {
        ... on Asset {
          assetMaterializations(partitions: $partitions) {
            partition
            tags { key value }
            metadataEntries {
              label
              ... on JsonMetadataEntry { jsonString }
              ... on TextMetadataEntry { text }
              ... on IntMetadataEntry { intValue }
            }
          }
        }
      }
    }`,
    { key: { path: ASSET_KEY }, partitions: [PARTITION] },
  );
  return data.assetOrError.assetMaterializations;
}

const versionOf = (m: Materialization) => m.tags.find((t) => t.key === 'dagster/data_version')?.value;

describe('the dagster target against dagster-webserver 1.13', () => {
  it('reports a covered hour once per data version, a redelivery included, and the run succeeds', async () => {
    const db = await createTestDatabase();
    const prefix = createTestPrefix();
    const target = {
      type: 'dagster',
      url: dagsterUrl,
      asset_key: ASSET_KEY.join('/'),
      partition_format: 'yyyy-MM-dd-HH:mm',
    };
    const raw = {
      database_url: db.url,
      redis_url: REDIS_URL,
      log_level: 'info',
      http: { host: '127.0.0.1', port: 0 },
      api_tokens: [TOKEN],
      queue: { backend: 'redis', prefix, batch_wait: 'PT0.002S' },
      lease: { ttl: 'PT2S', renew_every: 'PT0.5S', retry_every: 'PT0.2S' },
      scheduler: { run_check_every: 'PT0.5S' },
      shutdown_timeout: 'PT10S',
      rollups: [{ id: 'dg_hourly', upstream: ['dg.orders'], every: 'hour', begin: BEGIN, target }],
    };
    const config = parseConfig(raw);
    let daemon: DaemonProcess | undefined;
    try {
      const running = await procs.spawn({ name: 'dagster-target', config: raw });
      daemon = running;
      const period = async () => {
        const r = await fetch(`${running.url}/v1/rollups/dg_hourly/periods/${PERIOD_KEY}`);
        return (await r.json()) as { period: { run: { state: string; generation: number } | null } };
      };
      const producer = testProducer(config);
      const began = Date.now();
      for (let m = 0; m < 60; m += 15) {
        const start = new Date(Date.parse(HOUR_START) + m * 60_000).toISOString();
        const end = new Date(Date.parse(HOUR_START) + (m + 15) * 60_000).toISOString();
        await producer.add('e', { asset: 'dg.orders', start, end, version: 'v1', id: `dg-${m}` });
      }

      // 1. The decision reaches Dagster and the run succeeds once Dagster holds it.
      await waitFor(async () => (await period()).period.run?.state === 'succeeded', {
        timeout: 60_000,
        interval: 200,
        what: 'the dagster run of the hour to succeed',
      });
      const succeededMs = Date.now() - began;
      const first = await materializations();
      expect(first).toHaveLength(1);
      expect(first[0]!.partition).toBe(PARTITION);
      expect(versionOf(first[0]!)).toBe('dg_hourly#1');
      const meta = Object.fromEntries(first[0]!.metadataEntries.map((e) => [e.label, e]));
      expect(meta.rollup?.text).toBe('dg_hourly');
      expect(meta.generation?.intValue).toBe(1);
      expect(meta.period_key?.text).toBe(PERIOD_KEY);
      expect(JSON.parse(meta.upstreams!.jsonString!)).toEqual({
        'dg.orders': { ratio: 1, missing: [], replay_required: [], versions: ['v1'] },
      });
      // The partition is one of the asset's own (Dagster counts it materialized).
      const stats = await graphql<{ assetNodeOrError: { partitionStats: { numMaterialized: number } } }>(
        `query ($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { ... on AssetNode { partitionStats { numMaterialized } } } }`,
        { key: { path: ASSET_KEY } },
      );
      expect(stats.assetNodeOrError.partitionStats.numMaterialized).toBe(1);

      // 2. A forced redelivery: the stored decision delivered again through the daemon's target code.
      const [stored] = await db.sql<{ target: StoredTarget; payload: TriggerPayload }[]>`
        select target, payload from triggers where rollup_id = 'dg_hourly'`;
      const targets = new Targets(
        undefined as never,
        prefix,
        config.rollups.map((r) => r.target),
      );
      try {
        expect(await targets.deliver(stored!.target, attemptPayload(stored!.payload, 1))).toEqual({
          ok: true,
        });
      } finally {
        await targets.close();
      }
      const afterRedelivery = await materializations();
      expect(afterRedelivery.map(versionOf)).toEqual(['dg_hourly#1']);

      // 3. A manual trigger is generation 2: a second data version of the partition.
      const manual = await fetch(
        `${running.url}/v1/rollups/dg_hourly/periods/${encodeURIComponent(HOUR_START)}/trigger`,
        {
          method: 'POST',
          headers: { authorization: `Bearer ${TOKEN}` },
        },
      );
      expect(manual.status).toBe(202);
      await waitFor(
        async () => {
          const p = (await period()).period.run;
          return p?.generation === 2 && p.state === 'succeeded';
        },
        { timeout: 60_000, interval: 200, what: 'generation 2 to succeed' },
      );
      const second = await materializations();
      expect(second.map(versionOf).sort()).toEqual(['dg_hourly#1', 'dg_hourly#2']);
      expect((await running.stop()).code).toBe(0);
      report(
        `dagster: dagster-webserver 1.13.28 ready in ${startedMs} ms; 4 events of dg.orders to the run of ` +
          `${PERIOD_KEY} succeeded in ${succeededMs} ms, Dagster holds one materialization of ` +
          `${ASSET_KEY.join('/')} partition ${PARTITION} data version dg_hourly#1 (still one after a forced ` +
          `redelivery), and dg_hourly#2 after a manual trigger`,
      );
    } finally {
      await daemon?.stop();
    }
  });

  it('a repair request is one observation of the repairs asset per attempt, a redelivery included, and the example sensor asks for its backfill run', async () => {
    const REPAIRS = ['warehouse', 'orders_repairs'];
    const target = {
      type: 'dagster' as const,
      url: dagsterUrl,
      asset_key: REPAIRS,
      headers: {},
      timeout: 10_000,
    };
    const targets = new RepairTargets(undefined as never, 'bull', [target]);
    const attempt = (n: number, rollup: string | null = 'dg_hourly') =>
      repairPayload({
        id: rollup === null ? 4 : 3,
        attempt: n,
        asset: 'warehouse.orders',
        ranges: [
          {
            start: Date.parse(HOUR_START) * 1000,
            end: (Date.parse(HOUR_START) + 900_000) * 1000,
            kind: 'missing',
            requiredVersion: null,
          },
        ],
        rangesTotal: 1,
        missingTotal: 900_000_000,
        rollup,
        period:
          rollup === null
            ? null
            : {
                start: HOUR_START,
                end: new Date(Date.parse(HOUR_START) + 3_600_000).toISOString(),
                key: PERIOD_KEY,
              },
        format: (p) => new Date(p / 1000).toISOString(),
        unitSeconds: 1e-6,
        requestedAt: new Date(),
      });
    const observations = async (key: readonly string[] = REPAIRS) => {
      const data = await graphql<{ assetOrError: { assetObservations: Materialization[] } }>(
        `query ($key: AssetKeyInput!) {
          assetOrError(assetKey: $key) {
            ... on Asset { assetObservations { partition tags { key value } metadataEntries { __typename label ... on JsonMetadataEntry { jsonString } ... on TextMetadataEntry { text } ... on IntMetadataEntry { intValue } } } }
          }
        }`,
        { key: { path: key } },
      );
      return data.assetOrError.assetObservations;
    };
    const first = attempt(1);
    try {
      expect(await targets.deliver(redactTarget(target), first)).toEqual({ ok: true });
      expect(await targets.deliver(redactTarget(target), first)).toEqual({ ok: true });
      const once = await observations();
      expect(once).toHaveLength(1);
      const meta = Object.fromEntries(once[0]!.metadataEntries.map((e) => [e.label, e]));
      expect(meta.idempotency_key?.text).toBe('repair-3~a1');
      expect(meta.asset?.text).toBe('warehouse.orders');
      expect(meta.attempt?.intValue).toBe(1);
      expect(JSON.parse(meta.ranges!.jsonString!)).toEqual(first.ranges);
      expect(once[0]!.tags.some((t) => t.key === 'dagster/data_version')).toBe(false);
      expect(await targets.deliver(redactTarget(target), attempt(2))).toEqual({ ok: true });
      expect(await observations()).toHaveLength(2);
      // A request made by hand: its null rollup and period arrive as null entries.
      expect(await targets.deliver(redactTarget(target), attempt(1, null))).toEqual({ ok: true });
      const all = await observations();
      expect(all).toHaveLength(3);
      const hand = all.find((o) => o.metadataEntries.some((e) => e.text === 'repair-4~a1'))!;
      const nulls = hand.metadataEntries.filter((e) => e.label === 'rollup' || e.label === 'period');
      expect(nulls.map((e) => e.__typename)).toEqual(['NullMetadataEntry', 'NullMetadataEntry']);
      // An asset key Dagster has never heard of (not in defs.py): the first post makes it, once.
      const unknown = { ...target, asset_key: ['warehouse', 'undeclared_repairs'] };
      const other = new RepairTargets(undefined as never, 'bull', [unknown]);
      try {
        expect(await other.deliver(redactTarget(unknown), first)).toEqual({ ok: true });
        expect(await other.deliver(redactTarget(unknown), first)).toEqual({ ok: true });
      } finally {
        await other.close();
      }
      expect(await observations(unknown.asset_key)).toHaveLength(1);
    } finally {
      await targets.close();
    }

    // The example's sensor, evaluated once against the same instance, asks for one run per attempt.
    const preview = spawnSync(
      venvBin('dagster', 'dagster'),
      ['sensor', 'preview', 'orders_repair_requests', '-f', exampleFile('dagster/defs.py')],
      { env: { ...process.env, DAGSTER_HOME: home }, encoding: 'utf8', timeout: 240_000 },
    );
    expect(preview.status, preview.stderr).toBe(0);
    expect(preview.stdout).toContain('repair-3~a1');
    expect(preview.stdout).toContain('repair-3~a2');
    expect(preview.stdout).toContain('repair-4~a1');
    report(
      'dagster: a repair request became one observation of warehouse/orders_repairs per attempt (a redelivery added none); the example sensor asked for a backfill run of each',
    );
  });
});
