import { describe, expect, it } from 'vitest';
import {
  type ApiRollup,
  buildCatalog,
  catalogChange,
  settingsNeedingRestart,
} from '../../../src/config/catalog.js';
import { ConfigError } from '../../../src/config/errors.js';
import { parseConfig } from '../../../src/config/index.js';

const rollup = (id: string, extra: Record<string, unknown> = {}) => ({
  id,
  upstream: [`${id}.in`],
  every: 'hour',
  begin: '2026-11-01',
  target: { type: 'queue', queue: 'runs' },
  ...extra,
});
const file = (rollups: unknown[], extra: Record<string, unknown> = {}) => ({
  config: parseConfig({ database_url: 'postgres://h/db', redis_url: 'redis://h', rollups, ...extra }),
  origin: 'config.yaml',
});
const api = (id: string, extra: Record<string, unknown> = {}): ApiRollup => ({
  id,
  definition: rollup(id, extra),
  writtenBy: 'api',
  writtenAt: new Date('2026-12-07T00:00:00Z'),
});
const errors = (build: () => unknown) => {
  try {
    build();
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
  throw new Error('built');
};

describe('buildCatalog', () => {
  it('lists the file rollups first, then the API ones, each with its source', () => {
    const catalog = buildCatalog(file([rollup('f1'), rollup('f2')]), [api('a1')]);
    expect(catalog.entries.map((e) => `${e.runtime.rollup.id}:${e.source}`)).toEqual([
      'f1:file',
      'f2:file',
      'a1:api',
    ]);
    expect(catalog.entry('a1')?.written).toEqual({ by: 'api', at: new Date('2026-12-07T00:00:00Z') });
  });

  it('keeps an unchanged rollup as it was built, so a change is told by identity', () => {
    const before = buildCatalog(file([rollup('f1'), rollup('f2')]), [api('a1'), api('a2')]);
    const after = buildCatalog(
      file([rollup('f1'), rollup('f2', { every: 'day' }), rollup('f3')]),
      [api('a1'), api('a2', { rerun: 'never' })],
      before,
    );
    expect(after.get('f1')).toBe(before.get('f1'));
    expect(after.get('a1')).toBe(before.get('a1'));
    expect(catalogChange(before, after)).toEqual({ added: ['f3'], changed: ['f2', 'a2'], removed: [] });
    expect(catalogChange(after, before)).toEqual({ added: [], changed: ['f2', 'a2'], removed: ['f3'] });
  });

  it("refuses an API rollup with the config's words, named by its id, every problem at once", () => {
    const message = errors(() =>
      buildCatalog(file([rollup('f1')]), [api('a1', { every: 'fortnight' }), api('a2', { upstrem: 'x' })]),
    );
    expect(message).toMatch(/rollups\[a1\]\.every: "fortnight" is neither/);
    expect(message).toMatch(/rollups\[a2\]\.upstrem: unknown key; did you mean upstream\?/);
  });

  it('refuses a period too long for the calendar as a problem of every, not an exception', () => {
    expect(errors(() => buildCatalog(file([]), [api('a1', { every: 'P1000000Y' })]))).toMatch(
      /rollups\[a1\]\.every: period 1 of UTC is out of range/,
    );
  });

  it('checks the file and the API together: an id in both, a cycle across them, a domain clash', () => {
    expect(errors(() => buildCatalog(file([rollup('f1')]), [api('f1')]))).toMatch(
      /rollups\[f1\]\.id: defined in the config file and through the API/,
    );
    const cycle = errors(() =>
      buildCatalog(file([rollup('f1', { upstream: ['b.out'], output: 'f1.out' })]), [
        api('b', { upstream: ['f1.out'], output: 'b.out' }),
      ]),
    );
    expect(cycle).toMatch(/rollup cycle/);
    const domains = errors(() =>
      buildCatalog(file([rollup('f1', { output: 'f1.out' })]), [
        api('ints', { upstream: ['f1.out'], every: 100, begin: 0 }),
      ]),
    );
    expect(domains).toMatch(/rollups\[ints\]\.upstream: asset f1\.out is the output of time rollup f1/);
  });
});

describe('settingsNeedingRestart', () => {
  it('names the top-level settings besides rollups that differ', () => {
    const a = file([rollup('f1')]).config;
    const b = file([rollup('f2')], { http: { port: 9000 }, lease: { ttl: 'PT30S' } }).config;
    expect(settingsNeedingRestart(a, b)).toEqual(['http', 'lease']);
  });
});
