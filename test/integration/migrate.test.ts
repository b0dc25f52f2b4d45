import { describe, expect, it } from 'vitest';
import { connect, type Sql } from '../../src/store/pg/db.js';
import { migrate, readMigrations, SchemaTooNewError } from '../../src/store/upkeep/migrate.js';
import { createLogger } from '../../src/support/log.js';
import { createEmptyDatabase } from '../helpers/db.js';

const log = createLogger('silent');
const migrations = readMigrations();

/** Tables, columns, constraints and indexes, in a stable textual form. */
async function schemaOf(sql: Sql): Promise<string[]> {
  const columns = await sql<{ d: string }[]>`
    select table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') as d
    from information_schema.columns where table_schema = 'public' order by 1`;
  const constraints = await sql<{ d: string }[]>`
    select conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid) as d
    from pg_constraint where connamespace = 'public'::regnamespace order by 1`;
  const indexes = await sql<{ d: string }[]>`
    select indexdef as d from pg_indexes where schemaname = 'public' order by 1`;
  // Event-log partitions are named by their bounds, which depend on when the migration ran.
  return [...columns, ...constraints, ...indexes].map((r) => r.d.replace(/events_p\d+_\d+/g, 'events_p*'));
}

describe('migrations', () => {
  it('are numbered without gaps', () => {
    expect(migrations.map((m) => m.version)).toEqual(migrations.map((_, i) => i + 1));
  });

  it('two migrators started at once both succeed and apply each migration once', async () => {
    const db = await createEmptyDatabase();
    const a = connect(db.url, { max: 1 });
    const b = connect(db.url, { max: 1 });
    const results = await Promise.all([migrate(a, log), migrate(b, log)]);
    await Promise.all([a.end(), b.end()]);
    expect(results.flat().sort((x, y) => x - y)).toEqual(migrations.map((m) => m.version));
    const rows = await db.sql<{ version: number }[]>`select version from schema_migrations order by version`;
    expect(rows.map((r) => r.version)).toEqual(migrations.map((m) => m.version));
  });

  it('a fresh database and one migrated step by step end with the same schema', async () => {
    const fresh = await createEmptyDatabase();
    const stepwise = await createEmptyDatabase();
    await migrate(fresh.sql, log);
    for (let i = 1; i <= migrations.length; i++) {
      expect(await migrate(stepwise.sql, log, migrations.slice(0, i))).toEqual([i]);
    }
    expect(await migrate(stepwise.sql, log)).toEqual([]);
    expect(await schemaOf(stepwise.sql)).toEqual(await schemaOf(fresh.sql));
    expect((await schemaOf(fresh.sql)).length).toBeGreaterThan(10);
  });

  it('refuses a database whose schema is newer than the code', async () => {
    const db = await createEmptyDatabase();
    await migrate(db.sql, log);
    await db.sql`insert into schema_migrations (version, name) values (${migrations.length + 1}, 'from_the_future')`;
    await expect(migrate(db.sql, log)).rejects.toBeInstanceOf(SchemaTooNewError);
    await expect(migrate(db.sql, log)).rejects.toThrow(/run a newer coverage-rollup/);
  });

  it('upgrading to sparse periods keeps every decided period and drops only untouched ones', async () => {
    const db = await createEmptyDatabase();
    const sparse = migrations.findIndex((m) => m.name === 'sparse_periods');
    await migrate(db.sql, log, migrations.slice(0, sparse));
    await db.sql`
      insert into rollups (id, definition, calendar_hash, definition_hash, materialized_until)
      values ('r', '{}', 'c', 'd', 50)`;
    // Materialised, as the old scheduler left them: untouched, touched, triggered, missed, requested.
    await db.sql`
      insert into periods (rollup_id, lo, hi, key, state, generation, last_change_at, manual_requested, reason)
      values ('r', 0, 10, '0', 'waiting', 0, null, false, null),
             ('r', 10, 20, '10', 'waiting', 0, now(), false, null),
             ('r', 20, 30, '20', 'triggered', 2, now(), false, 'update'),
             ('r', 30, 40, '30', 'missed', 0, null, false, null),
             ('r', 40, 50, '40', 'waiting', 0, null, true, null)`;
    await db.sql`
      insert into triggers (rollup_id, period_lo, generation, idempotency_key, reason, lease_token, target, payload)
      values ('r', 20, 1, 'r@20#1', 'covered', 1, '{}', '{}'), ('r', 20, 2, 'r@20#2', 'update', 1, '{}', '{}')`;
    await migrate(db.sql, log);
    const kept = await db.sql<{ lo: number; state: string; generation: number }[]>`
      select lo, state, generation from periods order by lo`;
    expect(kept).toEqual([
      { lo: 10, state: 'waiting', generation: 0 },
      { lo: 20, state: 'triggered', generation: 2 },
      { lo: 30, state: 'missed', generation: 0 },
      { lo: 40, state: 'waiting', generation: 0 },
    ]);
    expect(await db.sql`select generation from triggers order by generation`).toEqual([
      { generation: 1 },
      { generation: 2 },
    ]);
    const counts = await db.sql`select state, n from period_counts where n > 0 order by state`;
    expect(counts).toEqual([
      { state: 'missed', n: 1 },
      { state: 'triggered', n: 1 },
      { state: 'waiting', n: 2 },
    ]);
    // The counts follow every later change.
    await db.sql`update periods set state = 'triggered', generation = 1 where lo = 10`;
    await db.sql`delete from periods where lo = 40`;
    expect(await db.sql`select state, n from period_counts where n > 0 order by state`).toEqual([
      { state: 'missed', n: 1 },
      { state: 'triggered', n: 2 },
    ]);
  });
});
