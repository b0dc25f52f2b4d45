import postgres from 'postgres';
import type { TestProject } from 'vitest/node';
import { connect } from '../../src/index/db.js';
import { migrate } from '../../src/index/migrate.js';
import { createLogger } from '../../src/log.js';
import { ADMIN_URL, databaseUrl, uniqueName } from './env.js';

declare module 'vitest' {
  export interface ProvidedContext {
    templateDatabase: string;
  }
}

/** One migrated template per run; each test file clones it (see db.ts), so runs never collide. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const template = uniqueName('cr_template');
  const admin = postgres(ADMIN_URL, { max: 1, onnotice: () => {} });
  await admin`create database ${admin(template)}`;
  const sql = connect(databaseUrl(template), { max: 1 });
  await migrate(sql, createLogger('silent'));
  await sql.end();
  project.provide('templateDatabase', template);
  return async () => {
    await admin`drop database if exists ${admin(template)} with (force)`;
    await admin.end();
  };
}
