#!/usr/bin/env node
/**
 * `npm run test:real`: the suites against the real systems our users run.
 *
 * Each folder tools/real/<system>/ holds a pinned requirements.txt; its virtual environment lives
 * in .real/<system>/venv (ignored by git) and is reused while a stamp of the requirements file and
 * the Python version still matches, so only the first run pays for the installs. One venv per
 * system: Airflow, Dagster and pyspark pin different versions of the same libraries.
 * Then the distributions of python/ are built (tools/python/packages.mjs) and the wheels a system
 * lists in tools/real/<system>/wheels.txt are installed into its venv: the built wheels, not the
 * source tree, without dependencies (the pinned requirements hold them: `pip check` says so).
 * Then vitest runs test/real/ (vitest.real.config.ts); every test file starts the systems it needs
 * and stops them by pid (test/real/helpers/system.ts). Arguments are passed on to vitest, but
 * `--systems=a,b`, which installs only those systems' venvs (`npm run test:api` needs one).
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildDistributions, ensureVenv as ensureCheckVenv } from '../python/packages.mjs';

const ROOT = join(import.meta.dirname, '..', '..');
const SYSTEMS = join(ROOT, 'tools', 'real');
const VENVS = join(ROOT, '.real');
const PYTHON = process.env.REAL_PYTHON ?? 'python3.11';

function say(line) {
  process.stderr.write(`${line}\n`);
}

function run(cmd, args, options = {}) {
  const result = spawnSync(cmd, args, { stdio: 'inherit', ...options });
  if (result.error) throw result.error;
  if (result.status !== 0) {
    say(`test:real: ${cmd} ${args.join(' ')} exited ${result.status ?? result.signal}`);
    process.exit(result.status ?? 1);
  }
}

function pythonVersion() {
  const result = spawnSync(PYTHON, ['--version'], { encoding: 'utf8' });
  if (result.error || result.status !== 0) {
    say(`test:real needs ${PYTHON} (set REAL_PYTHON to another interpreter)`);
    process.exit(1);
  }
  return result.stdout.trim();
}

function ensureVenv(system, version) {
  const requirements = join(SYSTEMS, system, 'requirements.txt');
  const home = join(VENVS, system);
  const venv = join(home, 'venv');
  const stampFile = join(home, 'stamp');
  const stamp = createHash('sha256').update(version).update(readFileSync(requirements)).digest('hex');
  if (existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) {
    say(`test:real: ${system}: reusing ${venv}`);
    return;
  }
  const started = Date.now();
  say(`test:real: ${system}: installing ${requirements} into ${venv}`);
  rmSync(home, { recursive: true, force: true });
  mkdirSync(home, { recursive: true });
  run(PYTHON, ['-m', 'venv', venv]);
  const pip = join(venv, 'bin', 'pip');
  run(pip, ['install', '--quiet', '--disable-pip-version-check', '-r', requirements]);
  writeFileSync(stampFile, stamp);
  say(`test:real: ${system}: installed in ${Math.round((Date.now() - started) / 1000)} s`);
}

const args = process.argv.slice(2);
const only = args
  .find((arg) => arg.startsWith('--systems='))
  ?.slice('--systems='.length)
  .split(',');
const version = pythonVersion();
const systems = readdirSync(SYSTEMS, { withFileTypes: true })
  .filter((entry) => entry.isDirectory() && existsSync(join(SYSTEMS, entry.name, 'requirements.txt')))
  .map((entry) => entry.name)
  .filter((name) => only === undefined || only.includes(name))
  .sort();
for (const system of systems) ensureVenv(system, version);

const wheels = buildDistributions(ensureCheckVenv());
for (const system of systems) {
  const list = join(SYSTEMS, system, 'wheels.txt');
  if (!existsSync(list)) continue;
  const names = readFileSync(list, 'utf8')
    .split('\n')
    .map((line) => line.replace(/#.*/, '').trim())
    .filter(Boolean);
  const files = names.map((name) => {
    const wheel = wheels.get(name);
    if (!wheel) throw new Error(`${list}: no distribution ${name} in python/`);
    return wheel;
  });
  const bin = (program) => join(VENVS, system, 'venv', 'bin', program);
  run(bin('pip'), [
    'install',
    '--quiet',
    '--disable-pip-version-check',
    '--no-deps',
    '--force-reinstall',
    ...files,
  ]);
  run(bin('pip'), ['check'], { stdio: ['ignore', 'ignore', 'inherit'] });
  say(`test:real: ${system}: installed ${names.join(', ')} from their wheels`);
}

run(
  join(ROOT, 'node_modules', '.bin', 'vitest'),
  ['run', '-c', 'vitest.real.config.ts', ...args.filter((arg) => !arg.startsWith('--systems='))],
  { cwd: ROOT, env: { ...process.env, REAL_VENVS: VENVS } },
);
