import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../../support/log.js';
import { packageRoot } from '../../support/paths.js';
import type { Sql } from '../pg/db.js';

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

export class SchemaTooNewError extends Error {
  override readonly name = 'SchemaTooNewError';
}

export class MigrationFilesError extends Error {
  override readonly name = 'MigrationFilesError';
}

const FILE = /^(\d{4})_([a-z0-9_]+)\.sql$/;

/** Numbered, gap-free, append-only SQL files from migrations/. */
export function readMigrations(dir = join(packageRoot(), 'migrations')): Migration[] {
  const migrations = readdirSync(dir)
    .filter((f) => f.endsWith('.sql'))
    .sort()
    .map((file) => {
      const m = FILE.exec(file);
      if (!m) throw new MigrationFilesError(`migration file ${file} is not named NNNN_name.sql`);
      return { version: Number(m[1]), name: m[2]!, sql: readFileSync(join(dir, file), 'utf8') };
    });
  migrations.forEach((m, i) => {
    if (m.version !== i + 1)
      throw new MigrationFilesError(`migration ${m.version} (${m.name}) should be ${i + 1}`);
  });
  return migrations;
}

export function latestVersion(migrations = readMigrations()): number {
  return migrations.at(-1)?.version ?? 0;
}

/**
 * Applies pending migrations in one transaction behind an advisory lock. The applied version is
 * read inside the lock, so concurrent starters apply each migration once and all succeed.
 */
export async function migrate(sql: Sql, log: Logger, migrations = readMigrations()): Promise<number[]> {
  const latest = latestVersion(migrations);
  return sql.begin(async (tx) => {
    await tx`set local lock_timeout = '60s'`;
    await tx`select pg_advisory_xact_lock(hashtext('coverage-rollup.migrate'))`;
    await tx`
      create table if not exists schema_migrations (
        version int primary key,
        name text not null,
        applied_at timestamptz not null default now()
      )`;
    const [row] = await tx<
      { version: number | null }[]
    >`select max(version) as version from schema_migrations`;
    const current = row?.version ?? 0;
    if (current > latest) {
      throw new SchemaTooNewError(
        `the database schema is at version ${current} but this build knows only up to ${latest}: run a newer coverage-rollup (never an older one) against this database`,
      );
    }
    const applied: number[] = [];
    for (const m of migrations.filter((m) => m.version > current)) {
      await tx.unsafe(m.sql); // trusted files shipped with the code, not user input
      await tx`insert into schema_migrations (version, name) values (${m.version}, ${m.name})`;
      log.info({ version: m.version, name: m.name }, 'applied migration');
      applied.push(m.version);
    }
    return applied;
  });
}

/** The applied version, for readiness checks; 0 on an empty database. */
export async function appliedVersion(sql: Sql): Promise<number> {
  const [exists] = await sql<{ ok: boolean }[]>`select to_regclass('schema_migrations') is not null as ok`;
  if (!exists?.ok) return 0;
  const [row] = await sql<
    { version: number | null }[]
  >`select max(version) as version from schema_migrations`;
  return row?.version ?? 0;
}
