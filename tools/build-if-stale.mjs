#!/usr/bin/env node
/**
 * `npm start`'s prestart: compiles only when dist/ is missing or older than what it is built from
 * (src/, the tsconfig files, the lockfile), so a start after the first does not spend a full
 * compile (16 s on a busy machine) on code that has not changed. A fresh clone still builds.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const OUTPUT = 'dist/src/cli/main.js';
const INPUTS = ['src', 'tsconfig.json', 'tsconfig.build.json', 'package-lock.json'];

function newest(path) {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (!stat) return 0;
  if (!stat.isDirectory()) return stat.mtimeMs;
  let latest = stat.mtimeMs; // a deleted or renamed file changes its directory
  for (const entry of readdirSync(path)) latest = Math.max(latest, newest(join(path, entry)));
  return latest;
}

const built = statSync(OUTPUT, { throwIfNoEntry: false })?.mtimeMs ?? 0;
const sources = Math.max(...INPUTS.map(newest));
if (built >= sources) {
  process.stderr.write('build is up to date (dist/ is newer than src/); not compiling\n');
} else {
  process.stderr.write(
    built === 0 ? 'no build yet: compiling\n' : 'src/ changed since the last build: compiling\n',
  );
  const result = spawnSync('npm', ['run', 'build'], { stdio: 'inherit' });
  process.exit(result.status ?? 1);
}
