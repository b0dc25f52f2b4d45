/**
 * Plans do not depend on statistics: every statement the daemon runs against the big
 * tables (segments, the event log, periods, triggers, runs) reads them through an index, on a database
 * that was never analyzed (autovacuum is off here, as in CI) and again after ANALYZE. The daemon
 * runs behind a proxy that records each statement with its parameters as they went over the wire
 * (ingest, marking, evaluation, dispatch, the coverage answer, the listings, the status page), so
 * a statement added or moved later is checked without this file knowing it. Each is explained as
 * a custom plan (what the first executions of a prepared statement get) and as a generic plan
 * (what postgres.js' prepared statements may switch to after five).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { normalizeEvent } from '../../src/core/events.js';
import { commitEvents } from '../../src/store/assets/commit.js';
import { connectOnce } from '../../src/store/pg/db.js';
import { BlackholeProxy } from '../helpers/blackhole-proxy.js';
import { startTestDaemon, testConfig, testProducer } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { type BoundStatement, boundStatementReader } from '../helpers/pg-wire.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const T0 = Date.UTC(2026, 0, 1);
/** One-minute slices every other minute: more holes than one read answers whole (SMALL_WINDOW). */
const HOLES = 5000;
/** Contiguous hours of a second asset, so rollups over it trigger and runs are delivered. */
const FULL_HOURS = 200;
/** Assets with one event each: the assets table at a size where a scan of it would show. */
const OTHER_ASSETS = 2000;
/**
 * Holes in other assets, so that what a statement asks for is a minority of each big table, as at
 * scale (10,000 assets): a statement that reads a third of a table (seeding a rollup from a whole
 * asset's segments) is right to scan it once the planner knows that.
 */
const NOISE_ASSETS = 3;
const NOISE_HOLES = 20_000;

const db = await createTestDatabase();
const prefix = createTestPrefix();
const recorded = new Map<string, BoundStatement>();
const target = new URL(db.url);
const proxy = await BlackholeProxy.start(
  { host: target.hostname, port: Number(target.port || 5432) },
  {
    watch: () => {
      const read = boundStatementReader((s) => recorded.set(s.text, s));
      return (chunk) => {
        read(chunk);
        return false;
      };
    },
  },
);
afterAll(() => proxy.close());

const iso = (ms: number) => new Date(ms).toISOString();
const slice = (asset: string, start: number, end: number, id: string) =>
  normalizeEvent({ asset, start: iso(start), end: iso(end), id }, { maxPayloadBytes: 65_536 });

// Seeded straight into the index (the ingest path is recorded below with a few queued events).
for (let k = 0; k < HOLES; k += 5000) {
  const batch = [];
  for (let i = k; i < Math.min(HOLES, k + 5000); i++) {
    batch.push(slice('plan.holey', T0 + 2 * i * MINUTE, T0 + (2 * i + 1) * MINUTE, `h${i}`));
  }
  await commitEvents(db.sql, batch);
}
for (let a = 0; a < NOISE_ASSETS; a++) {
  for (let k = 0; k < NOISE_HOLES; k += 5000) {
    const batch = [];
    for (let i = k; i < Math.min(NOISE_HOLES, k + 5000); i++) {
      batch.push(slice(`plan.noise.${a}`, T0 + 2 * i * MINUTE, T0 + (2 * i + 1) * MINUTE, `n${a}.${i}`));
    }
    await commitEvents(db.sql, batch);
  }
}
await commitEvents(
  db.sql,
  Array.from({ length: FULL_HOURS }, (_, i) =>
    slice('plan.full', T0 + i * HOUR, T0 + (i + 1) * HOUR, `f${i}`),
  ),
);
await commitEvents(
  db.sql,
  Array.from({ length: OTHER_ASSETS }, (_, i) => slice(`plan.other.${i}`, T0, T0 + HOUR, `o${i}`)),
);

const config = testConfig(db, prefix, {
  database_url: proxy.proxiedUrl(db.url),
  rollups: [
    {
      id: 'holey',
      upstream: ['plan.holey'],
      every: 'hour',
      begin: '2026-01-01',
      target: { type: 'queue', queue: 'plan-runs' },
    },
    {
      id: 'full',
      upstream: ['plan.full'],
      every: 'hour',
      begin: '2026-01-01',
      target: { type: 'queue', queue: 'plan-runs' },
    },
    {
      id: 'tenminutes',
      upstream: ['plan.holey'],
      every: 'PT10M',
      begin: '2026-01-01',
      target: { type: 'queue', queue: 'plan-runs' },
    },
    {
      // A deadline, so the scrape's count of periods past it is recorded too.
      id: 'deadlined',
      upstream: ['plan.full'],
      every: 'hour',
      begin: '2026-01-01',
      policy: { deadline: 'PT1H', on_deadline: 'trigger', catch_up: 'PT2H' },
      target: { type: 'queue', queue: 'plan-runs' },
    },
    {
      id: 'daily',
      upstream: ['plan.holey', 'plan.full'],
      every: 'day',
      begin: '2026-01-01',
      target: { type: 'queue', queue: 'plan-runs' },
    },
  ],
});
// The daemon analyzes its own tables after large changes (src/store/upkeep/maintenance.ts): holding its
// maintenance lock keeps this database never analyzed until the test says so.
const maintenanceLock = await db.sql.reserve();
await maintenanceLock`select pg_advisory_lock(hashtext('coverage-rollup.prune'))`;
afterAll(() => maintenanceLock.release());
const daemon = await startTestDaemon(config);
const producer = testProducer(config);

/** Relations a hot statement must never scan whole: they grow with data, events and decisions. */
const BIG = /^(segments|periods|triggers|runs|run_reports|events(_p\d+_\d+)?)$/;

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Plan Rows': number;
  Plans?: PlanNode[];
}

/**
 * A scan of a table this small (512 KB: an empty partition made ahead, or here the outbox and runs
 * of a few hundred decisions) costs about what a few hundred index probes do: the planner may
 * rightly choose it. This test's segments, event log and periods are well above it; its triggers
 * and runs are not, so their statements are held to the bound only through the other tables.
 */
const SMALL_PAGES = 64;

/** Seq Scan nodes on big tables: the relation and how many rows the planner expects it to keep. */
function seqScans(node: PlanNode, out: Array<{ relation: string; rows: number }> = []) {
  if (node['Node Type'] === 'Seq Scan' && BIG.test(node['Relation Name'] ?? '')) {
    out.push({ relation: node['Relation Name']!, rows: node['Plan Rows'] });
  }
  for (const child of node.Plans ?? []) seqScans(child, out);
  return out;
}

/**
 * Once analyzed, the planner knows what a statement keeps of a table: wanting a tenth of it or
 * more (a marking update for a rollup that is a seventh of this test's periods), a scan is the
 * cheaper plan, and at scale (1,000 rollups, years of periods) the same statement wants a sliver
 * and gets an index. Never analyzed, its estimates are guesses: no scan of a big table passes.
 */
const WHOLE_SHARE = 0.1;

/** Statements worth explaining: reads and writes of the big tables (not DDL, not settings). */
const explainable = (text: string) =>
  /^\s*(select|insert|update|delete|with)\b/i.test(text) &&
  /\b(segments|periods|triggers|runs|run_reports|events)\b/i.test(text) &&
  !/\bpg_(catalog|class|inherits|stat)/i.test(text);

const literal = (v: string | null) => (v === null ? 'null' : `'${v.replaceAll("'", "''")}'`);

/** A statement that changes nothing: it may be run (EXPLAIN ANALYZE) to count what it reads. */
const readOnly = (text: string) =>
  /^\s*(select|with)\b/i.test(text) &&
  !/\b(insert\s+into|update\s+\w+(\s+\w+)?\s+set|delete\s+from)\b/i.test(text);

interface Executed extends PlanNode {
  'Actual Loops'?: number;
  'Index Cond'?: string;
  'Recheck Cond'?: string;
  Filter?: string;
  Plans?: Executed[];
}

/**
 * Scans of a big table run again and again with the same conditions (nothing from an outer row in
 * them): the coverage totals' plan without statistics re-ran "any one overlapping segment" for
 * each of 20,000 segments (120,000 pages to read 20,000 segments). A scan keyed by an outer row
 * (`asset_id = a.id`) is a lookup per row and fine.
 */
function uncorrelatedRescans(node: Executed, out: string[] = []): string[] {
  const conditions = [node['Index Cond'], node['Recheck Cond'], node.Filter]
    .filter((c) => c !== undefined)
    .join(' ')
    .replace(/'[^']*'/g, '');
  const correlated = /\b[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*\b/i.test(conditions);
  if (BIG.test(node['Relation Name'] ?? '') && (node['Actual Loops'] ?? 0) > 100 && !correlated) {
    out.push(`${node['Relation Name']} rescanned ${node['Actual Loops']} times`);
  }
  for (const child of node.Plans ?? []) uncorrelatedRescans(child, out);
  return out;
}

/**
 * The statements whose plan goes wrong, under the given plan cache mode, with their plans: those
 * that scan a big table, and reads that rescan one with unchanged conditions. Reads are executed
 * (EXPLAIN ANALYZE, which shows the loops), writes only planned.
 */
async function badPlans(mode: 'auto' | 'force_generic_plan', analyzed: boolean): Promise<string[]> {
  const explainer = connectOnce(db.url);
  const failures: string[] = [];
  try {
    await explainer.unsafe(`set plan_cache_mode = ${mode}`);
    const sizes = new Map(
      (
        await explainer<{ name: string; pages: number; rows: number }[]>`
          select relname as name, (pg_relation_size(oid) / 8192)::int as pages, reltuples::float8 as rows
          from pg_class where relkind = 'r'`
      ).map((r) => [r.name, r]),
    );
    const wrong = ({ relation, rows }: { relation: string; rows: number }) => {
      const size = sizes.get(relation);
      if (size === undefined || size.pages <= SMALL_PAGES) return false;
      return !analyzed || rows < WHOLE_SHARE * size.rows;
    };
    let n = 0;
    for (const s of recorded.values()) {
      if (!explainable(s.text)) continue;
      const oids = [...new Set(s.types.filter((t) => t !== 0))];
      const names = new Map(
        (
          await explainer<{ oid: number; name: string }[]>`
          select oid::int4 as oid, format_type(oid, null) as name from pg_type where oid = any(${oids}::oid[])`
        ).map((r) => [r.oid, r.name]),
      );
      const types = s.params.map((_, i) => names.get(s.types[i] ?? 0) ?? 'unknown');
      const name = `plan_${n++}`;
      await explainer.unsafe(`prepare ${name}${types.length ? `(${types.join(', ')})` : ''} as ${s.text}`);
      const args = s.params.length ? `(${s.params.map(literal).join(', ')})` : '';
      const run = readOnly(s.text);
      const [row] = await explainer.unsafe(
        `explain (${run ? 'analyze, buffers, ' : ''}format json) execute ${name}${args}`,
      );
      const plan = (row as unknown as { 'QUERY PLAN': [{ Plan: Executed }] })['QUERY PLAN'][0].Plan;
      const scans = seqScans(plan)
        .filter(wrong)
        .map((scan) => scan.relation);
      const problems = [
        ...(scans.length > 0 ? [`${scans.join(', ')} scanned`] : []),
        ...uncorrelatedRescans(plan),
      ];
      if (problems.length > 0) {
        const text = await explainer.unsafe(
          `explain ${run ? '(analyze, buffers) ' : ''}execute ${name}${args}`,
        );
        const lines = text.map((r) => (r as unknown as { 'QUERY PLAN': string })['QUERY PLAN']).join('\n');
        failures.push(`${problems.join('; ')} (${mode}) by:\n${s.text.trim()}\n${lines}`);
      }
      await explainer.unsafe(`deallocate ${name}`);
    }
  } finally {
    await explainer.end();
  }
  return failures;
}

describe('hot statements keep index plans without statistics', () => {
  it('records what the daemon runs: ingest, marking, evaluation, dispatch, answers, listings, the status page', {
    timeout: 180_000,
  }, async () => {
    const [{ analyzed }] = await db.sql<[{ analyzed: number }]>`
      select count(*)::int as analyzed from pg_stat_user_tables
      where last_analyze is not null or last_autoanalyze is not null`;
    expect(analyzed).toBe(0);
    await waitFor(
      async () => (await db.sql`select 1 from triggers where rollup_id = 'full'`).length >= FULL_HOURS - 1,
      { what: 'the full rollup triggered', timeout: 90_000 },
    );
    await waitFor(
      async () => (await db.sql`select 1 from runs where state = 'pending' limit 1`).length === 0,
      { what: 'the runs delivered', timeout: 60_000 },
    );
    // The ingest path, and marking and evaluation of what it touched.
    const at = T0 + 2 * HOLES * MINUTE;
    await producer.addBulk(
      Array.from({ length: 20 }, (_, i) => ({
        name: 'event',
        data: {
          asset: 'plan.holey',
          start: iso(at + 2 * i * MINUTE),
          end: iso(at + (2 * i + 1) * MINUTE),
          id: `n${i}`,
        },
      })),
    );
    await waitFor(
      async () =>
        (await db.sql`select 1 from events where event_id = 'n19'`).length === 1 &&
        (await db.sql`select 1 from periods where dirty limit 1`).length === 0,
      { what: 'the queued events indexed and evaluated', timeout: 90_000 },
    );
    const year = 'start=2026-01-01T00:00:00Z&end=2027-01-01T00:00:00Z';
    const key = iso(T0 + 10 * HOUR).slice(0, 13);
    const paths = [
      `/v1/assets/plan.holey/coverage?${year}`,
      `/v1/assets/plan.holey/coverage?${year}&order=newest&limit=1000`,
      `/v1/assets/plan.full/coverage?${year}`,
      '/v1/assets',
      '/v1/assets?q=plan.other.1',
      '/v1/rollups',
      `/v1/rollups/holey/periods?${year}`,
      `/v1/rollups/full/periods?${year}&state=triggered`,
      `/v1/rollups/full/periods?${year}&state=waiting&order=desc`,
      `/v1/rollups/full/periods?${year}&run_state=started&order=desc`,
      `/v1/rollups/full/periods/${key}`,
      '/',
      '/?rollup=holey',
      '/?asset=plan.holey',
      `/rollups/full/periods/${key}`,
      '/readyz',
      '/metrics',
    ];
    for (const url of paths) {
      const response = await daemon.http.inject({ url });
      expect(response.statusCode, `${url}: ${response.body.slice(0, 300)}`).toBe(200);
    }
    const texts = [...recorded.keys()];
    for (const table of ['segments', 'events', 'periods', 'triggers', 'runs']) {
      expect(texts.filter((t) => explainable(t) && t.includes(table)).length, table).toBeGreaterThan(0);
    }
  });

  it('reads no big table whole, nor one over and over, on the never-analyzed database', async () => {
    const failures = [...(await badPlans('auto', false)), ...(await badPlans('force_generic_plan', false))];
    expect(failures, failures.join('\n\n')).toEqual([]);
  });

  it('reads no big table whole, nor one over and over, after ANALYZE', async () => {
    await db.sql`analyze`;
    const failures = [...(await badPlans('auto', true)), ...(await badPlans('force_generic_plan', true))];
    expect(failures, failures.join('\n\n')).toEqual([]);
  });
});
