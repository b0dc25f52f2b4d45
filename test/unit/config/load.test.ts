import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { loadConfig } from '../../../src/config/index.js';
import { duplicateKey } from '../../../src/config/load.js';

const dir = mkdtempSync(join(tmpdir(), 'crconfig-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

const raw = {
  database_url: 'postgres://127.0.0.1:5432/x',
  queue: { prefix: 'p' },
  assets: [{ name: 'a "quoted" \\ name', domain: 'time' }],
  rollups: [
    {
      id: 'r',
      upstream: ['a "quoted" \\ name'],
      every: 'hour',
      begin: '2025-01-01',
      target: { type: 'queue', queue: 'runs' },
    },
  ],
};

describe('a config file written as JSON', () => {
  it('loads as the same config as its YAML spelling', () => {
    const json = loadConfig({ path: file('c.json', JSON.stringify(raw, null, 2)), env: {} });
    const yaml = loadConfig({ path: file('c.yaml', stringify(raw)), env: {} });
    expect(json).toEqual(yaml);
  });

  it('refuses a key repeated in one mapping, as YAML does', () => {
    const text = '{"queue": {"prefix": "p", "prefix": "q"}}';
    expect(() => loadConfig({ path: file('dup.json', text), env: {} })).toThrow(
      /is not valid YAML: Map keys must be unique \("prefix" appears twice/,
    );
    expect(() => loadConfig({ path: file('dup.yaml', 'queue: {prefix: p, prefix: q}\n'), env: {} })).toThrow(
      /is not valid YAML: Map keys must be unique/,
    );
  });

  it('leaves flow-style YAML that is not JSON to the YAML parser', () => {
    const config = loadConfig({ path: file('flow.yaml', '{queue: {prefix: flow}}'), env: {} });
    expect(config.queue.prefix).toBe('flow');
  });
});

describe('duplicateKey', () => {
  it('finds a key repeated within one object, never across objects or in values', () => {
    expect(duplicateKey('{"a": 1, "b": {"a": 2}, "c": ["a", "a", {"a": 3}]}')).toBeUndefined();
    expect(duplicateKey('{"a": {"x": "\\"", "x": 1}}')).toBe('x');
    expect(duplicateKey('{"k\\u0061": 1, "ka": 2}')).toBe('ka');
    expect(duplicateKey('[{"a": 1}, {"a": 1}]')).toBeUndefined();
    expect(duplicateKey('{"s": "{\\"a\\": 1, \\"a\\": 2}"}')).toBeUndefined();
  });
});
