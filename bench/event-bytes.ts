/**
 * Bytes per event in PostgreSQL: commits N events through commitEvents (the ingest path) into a
 * fresh database, VACUUMs, and divides the event log's total size (heap, TOAST and indexes, over
 * every partition) by N. The content is what bench:ingest sends: 50 assets of 5-minute slices,
 * interleaved at random as many producers would send them, with ids like "a7-1234", version "v1",
 * ISO bounds in UTC, no extra. Prints JSON.
 *
 *   npm run bench:event-bytes            # N = 200000
 *   BENCH_N=50000 npm run bench:event-bytes
 *   BENCH_IDS=0 npm run bench:event-bytes   # no producer ids: the key is the content's hash
 */
import { normalizeEvent } from '../src/core/events.js';
import { commitEvents } from '../src/index/commit.js';
import { createBenchDatabase, round } from './common.js';

const N = Number(process.env.BENCH_N ?? 200_000);
const ASSETS = 50;
const BATCH = 500;
const IDS = process.env.BENCH_IDS !== '0';
const T0 = Date.UTC(2025, 0, 1);
const FIVE_MINUTES = 5 * 60_000;

let seed = 42;
const rand = () => {
  seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
  return seed / 2 ** 31;
};
const next = new Array<number>(ASSETS).fill(0);

function event() {
  const a = Math.floor(rand() * ASSETS);
  const n = next[a]!++;
  const start = T0 + n * FIVE_MINUTES;
  return normalizeEvent(
    {
      asset: `bench.asset_${a}`,
      start: new Date(start).toISOString().replace('.000Z', 'Z'),
      end: new Date(start + FIVE_MINUTES).toISOString().replace('.000Z', 'Z'),
      version: 'v1',
      ...(IDS ? { id: `a${a}-${n}` } : {}),
    },
    { maxPayloadBytes: 65_536 },
  );
}

const db = await createBenchDatabase(2);
try {
  for (let i = 0; i < N; i += BATCH) {
    await commitEvents(
      db.sql,
      Array.from({ length: Math.min(BATCH, N - i) }, () => event()),
    );
  }
  await db.sql`vacuum analyze`;
  // Every relation of the log: the table itself or, once partitioned, its partitions.
  const [row] = await db.sql<{ heap: number; indexes: number; total: number; n: number }[]>`
    with parts as (
      select c.oid from pg_class c where c.relname = 'events' and c.relkind = 'r'
      union all
      select i.inhrelid from pg_inherits i where i.inhparent = 'events'::regclass
    )
    select sum(pg_table_size(oid))::int8 as heap, sum(pg_indexes_size(oid))::int8 as indexes,
      sum(pg_total_relation_size(oid))::int8 as total, (select count(*) from events)::int8 as n
    from parts`;
  const r = row!;
  process.stdout.write(
    `${JSON.stringify(
      {
        bench: 'event-bytes',
        events: r.n,
        producer_ids: IDS,
        bytes_per_event: round(r.total / r.n, 1),
        heap_bytes_per_event: round(r.heap / r.n, 1),
        index_bytes_per_event: round(r.indexes / r.n, 1),
      },
      null,
      2,
    )}\n`,
  );
} finally {
  await db.drop();
}
