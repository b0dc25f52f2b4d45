/**
 * The Python distributions of python/ are versioned with the daemon: each pyproject.toml declares
 * package.json's version, and a distribution that depends on another of them asks for that
 * version's series, so the three are built, tested and published in step.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../../../src/support/paths.js';

const root = packageRoot();
const daemon = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
const folders = readdirSync(join(root, 'python'), { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => entry.name);

function project(folder: string): { name: string; version: string; dependencies: string[] } {
  const text = readFileSync(join(root, 'python', folder, 'pyproject.toml'), 'utf8');
  const table = /^\[project\]\s*$([\s\S]*?)(?=^\[|(?![\s\S]))/m.exec(text)?.[1] ?? '';
  const field = (key: string) => new RegExp(`^${key}\\s*=\\s*"([^"]*)"`, 'm').exec(table)?.[1];
  const list = /^dependencies\s*=\s*\[([^\]]*)\]/m.exec(table)?.[1] ?? '';
  return {
    name: field('name') ?? '',
    version: field('version') ?? '',
    dependencies: [...list.matchAll(/"([^"]+)"/g)].map((m) => m[1]!),
  };
}

describe('the Python distributions', () => {
  it('are the ones the product names', () => {
    const names = folders.map((f) => project(f).name);
    expect(names).toEqual(
      expect.arrayContaining([
        'coverage-rollup',
        'airflow-provider-coverage-rollup',
        'dagster-coverage-rollup',
      ]),
    );
    for (const folder of folders) expect(project(folder).name, folder).toBe(folder);
  });

  it.each(folders)('%s has the daemon version', (folder) => {
    expect(project(folder).version).toBe(daemon.version);
  });

  it.each(folders)('%s asks for the client of its own version', (folder) => {
    const { name, dependencies } = project(folder);
    if (name === 'coverage-rollup') return;
    const client = dependencies.find((d) => /^coverage-rollup\b/.test(d));
    expect(client, `${name} depends on coverage-rollup`).toBe(`coverage-rollup~=${daemon.version}`);
  });
});
