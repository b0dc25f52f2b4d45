#!/usr/bin/env node
/**
 * `npm run py:check`: for each distribution of python/ (./packages.mjs), ruff (lint and format),
 * mypy and pytest, then its wheel and sdist built and checked by twine, in .py/venv with the
 * pinned tools of python/requirements-check.txt. No service is needed: the tests cover the parts
 * that run without one (the real suites run the built wheels against the daemon).
 */
import { join } from 'node:path';
import { bin, buildDistributions, DIST, ensureVenv, HOME, run, say } from './packages.mjs';

const started = Date.now();
const dists = ensureVenv();
for (const d of dists) {
  say(`py: ${d.name} ${d.version}`);
  const here = { cwd: d.dir };
  run(bin('ruff'), ['check', '--no-cache', '.'], here);
  run(bin('ruff'), ['format', '--no-cache', '--check', '.'], here);
  run(bin('mypy'), ['--cache-dir', join(HOME, 'mypy-cache', d.name)], here);
  run(bin('pytest'), ['-p', 'no:cacheprovider'], here);
}
const wheels = buildDistributions(dists);
run(bin('twine'), ['check', '--strict', `${DIST}/*`]);
say(
  `py: ${[...wheels.values()].map((w) => w.split('/').at(-1)).join(', ')} in ${Math.round((Date.now() - started) / 1000)} s`,
);
