import { inject } from 'vitest';
import { connect, connectOnce, type Sql } from '../../src/store/pg/db.js';
import { atFileEnd } from './cleanup.js';
import { ADMIN_URL, databaseUrl, uniqueName } from './env.js';

export interface TestDatabase {
  readonly name: string;
  readonly url: string;
  readonly sql: Sql;
}

/**
 * A fresh, migrated database for one test file, cloned from the run's template and dropped after
 * the file (wherever it is called: module level, beforeAll or a test).
 */
export function createTestDatabase(): Promise<TestDatabase> {
  return createDatabase('cr_test', inject('templateDatabase'));
}

/** An empty (unmigrated) database, for migration tests; dropped after the file like the above. */
export function createEmptyDatabase(): Promise<TestDatabase> {
  return createDatabase('cr_empty', null);
}

async function createDatabase(prefix: string, template: string | null): Promise<TestDatabase> {
  const name = uniqueName(prefix);
  const admin = connectOnce(ADMIN_URL);
  // Concurrent clones of one template can collide on its lock; retry briefly.
  for (let attempt = 0; ; attempt++) {
    try {
      if (template) await admin`create database ${admin(name)} template ${admin(template)}`;
      else await admin`create database ${admin(name)}`;
      break;
    } catch (error) {
      if ((error as { code?: string }).code !== '55006' || attempt > 50) throw error;
      await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
    }
  }
  const url = databaseUrl(name);
  const sql = connect(url, { max: 5 });
  atFileEnd(async () => {
    await sql.end({ timeout: 5 });
    await admin`drop database if exists ${admin(name)} with (force)`;
    await admin.end();
  });
  return { name, url, sql };
}
