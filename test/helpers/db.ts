import postgres from 'postgres';
import { afterAll, inject } from 'vitest';
import { connect, type Sql } from '../../src/index/db.js';
import { ADMIN_URL, databaseUrl, uniqueName } from './env.js';

export interface TestDatabase {
  readonly name: string;
  readonly url: string;
  readonly sql: Sql;
}

/**
 * A fresh, migrated database for one test file, cloned from the run's template and dropped after
 * the file. Call at module level or in beforeAll.
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  const name = uniqueName('cr_test');
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  // Concurrent clones of one template can collide on its lock; retry briefly.
  for (let attempt = 0; ; attempt++) {
    try {
      await admin`create database ${admin(name)} template ${admin(inject('templateDatabase'))}`;
      break;
    } catch (error) {
      if ((error as { code?: string }).code !== '55006' || attempt > 50) throw error;
      await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
    }
  }
  const url = databaseUrl(name);
  const sql = connect(url, { max: 5 });
  afterAll(async () => {
    await sql.end({ timeout: 5 });
    await admin`drop database if exists ${admin(name)} with (force)`;
    await admin.end();
  });
  return { name, url, sql };
}

/** An empty (unmigrated) database, for migration tests. */
export async function createEmptyDatabase(): Promise<TestDatabase> {
  const name = uniqueName('cr_empty');
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  await admin`create database ${admin(name)}`;
  const url = databaseUrl(name);
  const sql = connect(url, { max: 5 });
  afterAll(async () => {
    await sql.end({ timeout: 5 });
    await admin`drop database if exists ${admin(name)} with (force)`;
    await admin.end();
  });
  return { name, url, sql };
}
