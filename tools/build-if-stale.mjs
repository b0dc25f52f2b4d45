#!/usr/bin/env node
/**
 * Compiles src/ into dist/ when dist/ is missing or older than what it is built from (src/, the
 * tsconfig files, the lockfile), so the daemon always runs what src/ says and never pays for a
 * compile it does not need.
 *
 * - `npm ci` / `npm install` run it as `prepare` (`--install`): a fresh clone is built at install
 *   time, so the first `npm start` starts at once. Where it cannot build, it says why and lets the
 *   install finish: `--omit=dev` (no TypeScript; a dist/ already there is used as it is) or a
 *   Dockerfile's dependency layer (no src/ yet; the image builds after copying it).
 * - `npm start` runs it as `prestart`: an edit of src/ since the last build is compiled first.
 *
 * Staleness is read against a stamp holding the time the last successful build STARTED, so an
 * edit made while tsc runs counts as newer (test/helpers/global-setup.ts keeps the same stamp).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const install = process.argv.includes('--install');
const OUTPUT = 'dist/src/cli/main.js';
const STAMP = 'dist/.build-stamp';
const INPUTS = ['src', 'tsconfig.json', 'tsconfig.build.json', 'package-lock.json'];
const TSC = 'node_modules/typescript/bin/tsc';

function newest(path) {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (!stat) return 0;
  if (!stat.isDirectory()) return stat.mtimeMs;
  let latest = stat.mtimeMs; // a deleted or renamed file changes its directory
  for (const entry of readdirSync(path)) latest = Math.max(latest, newest(join(path, entry)));
  return latest;
}

const say = (text) => process.stderr.write(`coverage-rollup build: ${text}\n`);

if (!existsSync('src')) {
  // An image's dependency layer installs before the sources are copied in.
  say('no src/ here yet: nothing to build');
  process.exit(0);
}
const built = existsSync(OUTPUT)
  ? (statSync(STAMP, { throwIfNoEntry: false }) ?? statSync(OUTPUT)).mtimeMs
  : 0;
const sources = Math.max(...INPUTS.map(newest));
if (built >= sources) {
  if (!install) say('dist/ is up to date with src/; not compiling');
  process.exit(0);
}
if (!existsSync(TSC)) {
  // npm ci --omit=dev: no compiler. A dist/ already there runs; none at all cannot.
  if (built > 0) {
    say('src/ is newer than dist/, but TypeScript is not installed (--omit=dev): running dist/ as it is');
    process.exit(0);
  }
  say(
    'there is no build (dist/) and TypeScript is not installed (--omit=dev): run npm ci with the dev dependencies, then npm run build',
  );
  process.exit(install ? 0 : 1);
}
say(
  built === 0 ? 'no build yet: compiling (about 10 s, once)' : 'src/ changed since the last build: compiling',
);
const startedAt = new Date();
const result = spawnSync(process.execPath, [TSC, '-p', 'tsconfig.build.json'], { stdio: 'inherit' });
if (result.status !== 0) {
  say(
    `tsc failed (exit ${result.status ?? result.signal}); fix the errors above, or run npm run build to see them again`,
  );
  process.exit(result.status ?? 1);
}
writeFileSync(STAMP, '');
utimesSync(STAMP, startedAt, startedAt);
