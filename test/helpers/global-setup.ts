import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import type { TestProject } from 'vitest/node';
import { connect, connectOnce } from '../../src/store/pg/db.js';
import { migrate } from '../../src/store/upkeep/migrate.js';
import { createLogger } from '../../src/support/log.js';
import { packageRoot } from '../../src/support/paths.js';
import { ADMIN_URL, databaseUrl, namesFile, REDIS_URL, RUN_ID, uniqueName } from './env.js';
import { deleteKeysContaining, keysContaining } from './redis-keys.js';

declare module 'vitest' {
  export interface ProvidedContext {
    templateDatabase: string;
  }
}

/** One migrated template per run; each test file clones it (see db.ts), so runs never collide. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const build = buildDist(); // alongside the template: the two take about the same time
  const template = uniqueName('cr_template');
  const admin = connectOnce(ADMIN_URL);
  await admin`create database ${admin(template)}`;
  const sql = connect(databaseUrl(template), { max: 1 });
  await migrate(sql, createLogger('silent'));
  await sql.end();
  await build;
  project.provide('templateDatabase', template);
  return async () => {
    await admin`drop database if exists ${admin(template)} with (force)`;
    try {
      await failOnLeftovers(admin);
    } finally {
      await admin.end();
      rmSync(namesFile(), { force: true });
    }
  };
}

/**
 * A green run leaves nothing behind: every database, role and Redis key whose name carries this
 * run's id (test/helpers/env.ts) should be gone by now. Anything left is listed, removed (so the
 * shared server stays clean) and fails the run, naming what to fix.
 */
async function failOnLeftovers(admin: ReturnType<typeof connectOnce>): Promise<void> {
  const pattern = `%\\_${RUN_ID}\\_%`;
  const databases = (
    await admin<{ datname: string }[]>`
    select datname from pg_database where datname like ${pattern} order by datname`
  ).map((r) => r.datname);
  const roles = (
    await admin<{ rolname: string }[]>`
    select rolname from pg_roles where rolname like ${pattern} order by rolname`
  ).map((r) => r.rolname);
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  let keys: string[] = [];
  try {
    await redis.connect();
    keys = await keysContaining(redis, `_${RUN_ID}_`);
    if (keys.length > 0) await deleteKeysContaining(redis, `_${RUN_ID}_`);
  } finally {
    redis.disconnect();
  }
  for (const name of databases) await admin`drop database if exists ${admin(name)} with (force)`;
  for (const name of roles) await admin`drop role if exists ${admin(name)}`;
  const prefixes = [...new Set(keys.map((key) => key.split(':')[0] ?? key))].sort();
  const madeBy = whoMade(readNames());
  const found = [
    ...databases.map((name) => `database ${name}${madeBy(name)}`),
    ...roles.map((name) => `role ${name}${madeBy(name)}`),
    ...prefixes.map(
      (prefix) =>
        `Redis keys under ${prefix} (${keys.filter((k) => k.startsWith(prefix)).length})${madeBy(prefix)}`,
    ),
  ];
  if (found.length === 0) return;
  const message =
    `The test run left ${found.length} thing(s) behind (now removed); a test file that creates a ` +
    `database or queue prefix must drop it (use test/helpers/db.ts and redis.ts):\n  ${found.join('\n  ')}`;
  console.error(message);
  // vitest reports an error thrown here as "error during close" but still exits 0: set the code.
  process.exitCode = 1;
  throw new Error(message);
}

/** The names test/helpers/env.ts uniqueName gave out in this run, with the file each was made for. */
function readNames(): Map<string, string> {
  const names = new Map<string, string>();
  let text = '';
  try {
    text = readFileSync(namesFile(), 'utf8');
  } catch {
    return names;
  }
  for (const line of text.split('\n')) {
    const [name, file] = line.split('\t');
    if (name && file) names.set(name, file);
  }
  return names;
}

/**
 * ` (made by <file>)` for a leftover: a database or role is a name itself, a Redis key prefix
 * contains one (queue groups hash-tag it: `{<prefix>-1}`). Empty when the name is not on record.
 */
export function whoMade(names: ReadonlyMap<string, string>): (leftover: string) => string {
  return (leftover) => {
    const file = names.get(leftover) ?? [...names].find(([name]) => leftover.includes(name))?.[1];
    return file ? ` (made by ${file})` : '';
  };
}

/**
 * Tests that spawn the daemon as a process (test/helpers/process.ts) run the BUILT code, so dist/
 * must match src/: `tsc -p tsconfig.build.json` once per run, skipped when no input is newer than
 * the last successful build. A type error still emits (noEmitOnError is off): it is reported and
 * the next run builds again; only a build that leaves no entry point fails the run.
 */
async function buildDist(): Promise<void> {
  const root = packageRoot();
  const entry = join(root, 'dist', 'src', 'cli', 'main.js');
  const stamp = join(root, 'dist', '.build-stamp');
  const inputs = ['tsconfig.json', 'tsconfig.build.json', 'package-lock.json'].map((f) => join(root, f));
  const newest = Math.max(...[...inputs, ...files(join(root, 'src'))].map(mtime));
  if (existsSync(entry) && existsSync(stamp) && mtime(stamp) >= newest) return;
  const startedAt = new Date(); // edits made while it builds count as newer than this build
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  try {
    await promisify(execFile)(process.execPath, [tsc, '-p', 'tsconfig.build.json'], {
      cwd: root,
      maxBuffer: 16 * 1024 * 1024,
    });
    writeFileSync(stamp, '');
    utimesSync(stamp, startedAt, startedAt);
  } catch (error) {
    const { stdout = '', stderr = '' } = error as { stdout?: string; stderr?: string };
    if (!existsSync(entry)) throw new Error(`build failed: tsc -p tsconfig.build.json\n${stdout}${stderr}`);
    console.warn(
      `global setup: tsc -p tsconfig.build.json reported errors (dist/ emitted anyway):\n${stdout}${stderr}`,
    );
  }
}

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name));
}

function mtime(file: string): number {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return Number.POSITIVE_INFINITY; // a missing input: build
  }
}
