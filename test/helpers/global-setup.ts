import { execFile } from 'node:child_process';
import { existsSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { TestProject } from 'vitest/node';
import { connect, connectOnce } from '../../src/index/db.js';
import { migrate } from '../../src/index/migrate.js';
import { createLogger } from '../../src/log.js';
import { packageRoot } from '../../src/paths.js';
import { ADMIN_URL, databaseUrl, uniqueName } from './env.js';

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
    await admin.end();
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
