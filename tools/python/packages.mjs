/**
 * The Python distributions of python/<distribution>/ (each with its own pyproject.toml), the venv
 * their checks run in, and their built wheels and sdists: shared by `npm run py:check`
 * (./check.mjs) and `npm run test:real` (../real/run.mjs), which installs the built wheels.
 *
 * The venv is .py/venv (ignored by git), made with python/requirements-check.txt installed with
 * --no-deps and each distribution installed editable; it is reused while a stamp of that file,
 * the Python version and the list of distributions still matches. Builds go to .py/dist.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const ROOT = join(import.meta.dirname, '..', '..');
export const PYTHON = process.env.REAL_PYTHON ?? 'python3.11';
const PACKAGES = join(ROOT, 'python');
export const HOME = join(ROOT, '.py');
export const VENV = join(HOME, 'venv');
export const DIST = join(HOME, 'dist');
const REQUIREMENTS = join(PACKAGES, 'requirements-check.txt');

export function say(line) {
  process.stderr.write(`${line}\n`);
}

/** Runs a command to its end, output shown; exits the process with its status if it fails. */
export function run(cmd, args, options = {}) {
  const result = spawnSync(cmd, args, { stdio: 'inherit', ...options });
  if (result.error) throw result.error;
  if (result.status !== 0) {
    say(`${cmd} ${args.join(' ')} exited ${result.status ?? result.signal}`);
    process.exit(result.status ?? 1);
  }
}

export function bin(program) {
  return join(VENV, 'bin', program);
}

/** Each distribution: its folder, and the name and version its pyproject.toml declares. */
export function distributions() {
  return readdirSync(PACKAGES, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(PACKAGES, entry.name, 'pyproject.toml')))
    .map((entry) => {
      const dir = join(PACKAGES, entry.name);
      const project = readFileSync(join(dir, 'pyproject.toml'), 'utf8');
      return { dir, name: match(project, 'name'), version: match(project, 'version') };
    })
    .sort((a, b) => a.name.localeCompare(b.name));
}

/** `key = "value"` of the [project] table. */
function match(pyproject, key) {
  const table = /^\[project\]\s*$([\s\S]*?)(?=^\[|(?![\s\S]))/m.exec(pyproject)?.[1] ?? '';
  const value = new RegExp(`^${key}\\s*=\\s*"([^"]*)"`, 'm').exec(table)?.[1];
  if (value === undefined) throw new Error(`pyproject.toml: [project] ${key} is missing`);
  return value;
}

/** Makes .py/venv unless its stamp still matches; returns the distributions. */
export function ensureVenv() {
  const version = spawnSync(PYTHON, ['--version'], { encoding: 'utf8' });
  if (version.error || version.status !== 0) {
    say(`the Python checks need ${PYTHON} (set REAL_PYTHON to another interpreter)`);
    process.exit(1);
  }
  const dists = distributions();
  const stampFile = join(HOME, 'stamp');
  const stamp = createHash('sha256')
    .update(version.stdout.trim())
    .update(readFileSync(REQUIREMENTS))
    .update(dists.map((d) => d.dir).join('\n'))
    .digest('hex');
  if (existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) return dists;
  const started = Date.now();
  say(`py: installing ${REQUIREMENTS} into ${VENV}`);
  rmSync(HOME, { recursive: true, force: true });
  mkdirSync(HOME, { recursive: true });
  run(PYTHON, ['-m', 'venv', VENV]);
  const pip = [bin('pip'), 'install', '--quiet', '--disable-pip-version-check', '--no-deps'];
  run(pip[0], [...pip.slice(1), '-r', REQUIREMENTS]);
  // Editable, so the tests and the type checker see the sources; hatchling is in the venv.
  run(pip[0], [...pip.slice(1), '--no-build-isolation', ...dists.flatMap((d) => ['-e', d.dir])]);
  writeFileSync(stampFile, stamp);
  say(`py: installed in ${Math.round((Date.now() - started) / 1000)} s`);
  return dists;
}

/** Builds every distribution's wheel and sdist into .py/dist; answers the wheel of each by name. */
export function buildDistributions(dists) {
  rmSync(DIST, { recursive: true, force: true });
  mkdirSync(DIST, { recursive: true });
  for (const d of dists) {
    run(bin('python'), ['-m', 'build', '--no-isolation', '--outdir', DIST, d.dir], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  }
  const files = readdirSync(DIST);
  const wheels = new Map();
  for (const d of dists) {
    const stem = `${d.name.replace(/[-.]+/g, '_')}-${d.version}`;
    const wheel = files.find((f) => f.startsWith(`${stem}-`) && f.endsWith('.whl'));
    const sdist = files.find((f) => f === `${stem}.tar.gz`);
    if (!wheel || !sdist) throw new Error(`${d.name}: no wheel or sdist ${stem} in ${DIST}`);
    wheels.set(d.name, join(DIST, wheel));
  }
  return wheels;
}
