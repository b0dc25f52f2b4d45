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
 *   BENCH_CONTENT=realistic npm run bench:event-bytes
 *
 * BENCH_CONTENT=realistic sends what producers send in practice: ids of 40 characters (a hex
 * digest, as a job or commit id), `produced_at` with milliseconds (7 s after the slice ends, as
 * bench:ingest does) and a short `extra` ({"job": "load_orders", "attempt": 1}).
 */
import { createHash } from 'node:crypto';
import { normalizeEvent } from '../src/core/events/events.js';
import { commitEvents } from '../src/store/assets/commit.js';
import { createBenchDatabase, round } from './common.js';

const N = Number(process.env.BENCH_N ?? 200_000);
const ASSETS = 50;
const BATCH = 500;
const IDS = process.env.BENCH_IDS !== '0';
const REALISTIC = process.env.BENCH_CONTENT === 'realistic';
const T0 = Date.UTC(2025, 0, 1);
const FIVE_MINUTES = 5 * 60_000;

let seed = 42;
const rand = () => {
  seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
  return seed / 2 ** 31;
};
const next = new Array<number>(ASSETS).fill(0);

/** A 40-character hex id, distinct per asset and slice. */
function hex40(a: number, n: number): string {
  return createHash('sha1').update(`${a}/${n}`).digest('hex');
}

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
      ...(IDS ? { id: REALISTIC ? hex40(a, n) : `a${a}-${n}` } : {}),
      ...(REALISTIC
        ? {
            produced_at: new Date(start + FIVE_MINUTES + 7_000).toISOString(),
            extra: { job: 'load_orders', attempt: 1 },
          }
        : {}),
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
  // Each index of the log, over every partition (a partition's index inherits from the log's).
  const byIndex = await db.sql<{ name: string; bytes: number }[]>`
    select p.relname as name, sum(pg_relation_size(i.inhrelid))::int8 as bytes
    from pg_index x join pg_class p on p.oid = x.indexrelid
    join pg_inherits i on i.inhparent = p.oid
    where x.indrelid = 'events'::regclass
    group by p.relname order by p.relname`;
  // Where a row's bytes go: the stored size of each column, averaged (null is 0), and the row.
  const [columns] = await db.sql<Record<string, number>[]>`
    select round(avg(pg_column_size(e.*)), 1)::float8 as row,
      round(avg(coalesce(pg_column_size(event_id), 0)), 1)::float8 as event_id,
      round(avg(coalesce(pg_column_size(event_id_hex), 0)), 1)::float8 as event_id_hex,
      round(avg(coalesce(pg_column_size(digest), 0)), 1)::float8 as digest,
      round(avg(coalesce(pg_column_size(version), 0)), 1)::float8 as version,
      round(avg(coalesce(pg_column_size(produced_at), 0) + coalesce(pg_column_size(produced_at_digits), 0)
        + coalesce(pg_column_size(produced_at_text), 0)), 1)::float8 as produced_at,
      round(avg(coalesce(pg_column_size(start_text), 0) + coalesce(pg_column_size(end_text), 0)), 1)::float8 as bound_texts,
      round(avg(coalesce(pg_column_size(extra), 0)), 1)::float8 as extra
    from events e`;
  process.stdout.write(
    `${JSON.stringify(
      {
        bench: 'event-bytes',
        events: r.n,
        producer_ids: IDS,
        content: REALISTIC ? 'realistic' : 'plain',
        bytes_per_event: round(r.total / r.n, 1),
        heap_bytes_per_event: round(r.heap / r.n, 1),
        index_bytes_per_event: round(r.indexes / r.n, 1),
        index_bytes_per_event_by_index: Object.fromEntries(
          byIndex.map((i) => [i.name, round(i.bytes / r.n, 1)]),
        ),
        // pg_column_size: the row's is its tuple without the 4-byte line pointer and page space.
        mean_stored_bytes: columns,
      },
      null,
      2,
    )}\n`,
  );
} finally {
  await db.drop();
}
