import { describe, expect, it } from 'vitest';
import { connect, type Sql } from '../../src/index/db.js';
import { migrate, readMigrations, SchemaTooNewError } from '../../src/index/migrate.js';
import { createLogger } from '../../src/log.js';
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
});
