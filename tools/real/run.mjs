#!/usr/bin/env node
/**
 * `npm run test:real`: the suites against the real systems our users run.
 *
 * Each folder tools/real/<system>/ holds a pinned requirements.txt; its virtual environment lives
 * in .real/<system>/venv (ignored by git) and is reused while a stamp of the requirements file and
 * the Python version still matches, so only the first run pays for the installs. One venv per
 * system: Airflow, Dagster and pyspark pin different versions of the same libraries.
 * The Python distributions of python/ are then built as a release would be (sdist, and the wheel
 * built from it, by the pinned front end and backend of tools/real/build/) and the built wheels
 * installed into the venvs of the systems that use them, never the source tree: what the suites
 * import is what `pip install` gives a user.
 * Then vitest runs test/real/ (vitest.real.config.ts); every test file starts the systems it needs
 * and stops them by pid (test/real/helpers/system.ts). Arguments are passed on to vitest.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

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

/** The distributions of python/ each system's venv gets, as built wheels (dependencies first). */
const WHEELS_FOR = {
  dagster: ['coverage-rollup', 'dagster-coverage-rollup'],
};

/** Builds each distribution once (sdist, then its wheel from the sdist) into .real/wheels/. */
function buildWheels(distributions) {
  const out = join(VENVS, 'wheels');
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const python = join(VENVS, 'build', 'venv', 'bin', 'python');
  const wheels = new Map();
  for (const dist of distributions) {
    const dir = join(out, dist);
    // Its progress lines are noise on success: shown only when the build fails.
    const args = ['-m', 'build', '--no-isolation', '--outdir', dir, join(ROOT, 'python', dist)];
    const built = spawnSync(python, args, { encoding: 'utf8' });
    if (built.error) throw built.error;
    if (built.status !== 0) {
      say(
        `${built.stdout}${built.stderr}test:real: building python/${dist} exited ${built.status ?? built.signal}`,
      );
      process.exit(built.status ?? 1);
    }
    const wheel = readdirSync(dir).find((name) => name.endsWith('.whl'));
    if (!wheel) throw new Error(`test:real: building python/${dist} made no wheel`);
    wheels.set(dist, join(dir, wheel));
  }
  return wheels;
}

/** Installs the built wheels into a system's venv; its pinned requirements hold their dependencies. */
function installWheels(system, wheels) {
  const pip = join(VENVS, system, 'venv', 'bin', 'pip');
  const quiet = ['--quiet', '--disable-pip-version-check'];
  run(pip, ['install', ...quiet, '--no-index', '--no-deps', '--force-reinstall', ...wheels]);
  run(pip, ['check', ...quiet]); // a dependency missing from the system's requirements.txt fails here
  say(`test:real: ${system}: installed ${wheels.map((w) => w.split('/').pop()).join(', ')}`);
}

const version = pythonVersion();
const systems = readdirSync(SYSTEMS, { withFileTypes: true })
  .filter((entry) => entry.isDirectory() && existsSync(join(SYSTEMS, entry.name, 'requirements.txt')))
  .map((entry) => entry.name)
  .sort();
for (const system of systems) ensureVenv(system, version);
const wheels = buildWheels([...new Set(Object.values(WHEELS_FOR).flat())]);
for (const [system, distributions] of Object.entries(WHEELS_FOR)) {
  installWheels(
    system,
    distributions.map((dist) => wheels.get(dist)),
  );
}

run(
  join(ROOT, 'node_modules', '.bin', 'vitest'),
  ['run', '-c', 'vitest.real.config.ts', ...process.argv.slice(2)],
  { cwd: ROOT, env: { ...process.env, REAL_VENVS: VENVS } },
);
