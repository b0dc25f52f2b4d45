/**
 * Config errors a person can act on: the field named by the rollup's id (`rollups[orders_daily]`,
 * not `rollups.0`), the bad value repeated (never a secret's), and for a misspelt key the nearest
 * key the schema knows ("did you mean upstream?").
 */
import type { z } from 'zod';
import { nearest } from '../core/nearest.js';

/** Fields whose values are never repeated in an error: they may hold credentials. */
const SECRET_FIELD = /url|token|password|secret|header|auth/i;
const MAX_VALUE_TEXT = 80;

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** One line per issue (per unknown key): `  field (from ENV): message`. */
export function describeIssues(
  issues: readonly z.core.$ZodIssue[],
  raw: unknown,
  schema: z.ZodType,
  fromEnv: ReadonlyMap<string, string>,
): string[] {
  return issues.flatMap((issue) => {
    const dotted = issue.path.join('.');
    const envName = [...fromEnv].find(([path]) => dotted === path || dotted.startsWith(`${path}.`))?.[1];
    const line = (path: readonly PropertyKey[], text: string) =>
      `  ${path.length > 0 ? fieldName(path, raw) : '(top level)'}${envName ? ` (from ${envName})` : ''}: ${text}`;
    if (issue.code === 'unrecognized_keys') {
      const known = knownKeys(schema, issue.path);
      return issue.keys.map((key) => {
        const near = nearest(key, known);
        return line([...issue.path, key], `unknown key${near ? `; did you mean ${near}?` : ''}`);
      });
    }
    return [line(issue.path, message(issue, raw))];
  });
}

/** `rollups[orders_daily].policy.deadline`, `assets[warehouse.orders].zone`; an index where no name is. */
export function fieldName(path: readonly PropertyKey[], raw: unknown): string {
  let text = '';
  let node: unknown = raw;
  for (const key of path) {
    const child =
      isRecord(node) || Array.isArray(node) ? (node as Record<PropertyKey, unknown>)[key] : undefined;
    if (typeof key === 'number') {
      const name = isRecord(child) ? (child.id ?? child.name) : undefined;
      text += typeof name === 'string' && name.trim() !== '' ? `[${name}]` : `[${key}]`;
    } else text += `${text === '' ? '' : '.'}${String(key)}`;
    node = child;
  }
  return text;
}

function message(issue: z.core.$ZodIssue, raw: unknown): string {
  const value = valueAt(raw, issue.path);
  // zod says "Invalid input: expected string, received undefined" for a key that is not there.
  if (value === undefined && (issue.code === 'invalid_type' || issue.code === 'invalid_union'))
    return issue.message.startsWith('required') ? issue.message : 'required';
  const secret = issue.path.some((p) => typeof p === 'string' && SECRET_FIELD.test(p));
  if (secret || typeof value === 'object' || typeof value === 'function') return issue.message;
  const shown = JSON.stringify(value);
  if (shown === undefined || issue.message.includes(shown)) return issue.message;
  const clipped = shown.length > MAX_VALUE_TEXT ? `${shown.slice(0, MAX_VALUE_TEXT)}…` : shown;
  return `${issue.message} (got ${clipped})`;
}

function valueAt(raw: unknown, path: readonly PropertyKey[]): unknown {
  let node = raw;
  for (const key of path) {
    if (!isRecord(node) && !Array.isArray(node)) return undefined;
    node = (node as Record<PropertyKey, unknown>)[key];
  }
  return node;
}

/** The keys the schema accepts for the object at `path` (all options' keys under a union). */
export function knownKeys(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  let nodes = [schema as unknown as Walkable];
  for (const key of path) nodes = nodes.flatMap((n) => objects(n)).flatMap((n) => childOf(n, key));
  return [...new Set(nodes.flatMap((n) => objects(n)).flatMap((n) => Object.keys(n._zod.def.shape ?? {})))];
}

interface Walkable {
  readonly _zod: {
    readonly def: {
      readonly type: string;
      readonly shape?: Record<string, Walkable>;
      readonly element?: Walkable;
      readonly innerType?: Walkable;
      readonly in?: Walkable;
      readonly out?: Walkable;
      readonly options?: readonly Walkable[];
    };
  };
}

/**
 * The object (or array) schemas a schema stands for, through defaults, pipes (either side: a
 * preprocess puts the object on the out side) and unions.
 */
function objects(node: Walkable): Walkable[] {
  const def = node._zod.def;
  if (def.type === 'object' || def.type === 'array') return [node];
  if (def.innerType) return objects(def.innerType);
  if (def.in || def.out) return [...(def.in ? objects(def.in) : []), ...(def.out ? objects(def.out) : [])];
  if (def.options) return def.options.flatMap(objects);
  return [];
}

function childOf(node: Walkable, key: PropertyKey): Walkable[] {
  const def = node._zod.def;
  if (def.type === 'array') return typeof key === 'number' && def.element ? [def.element] : [];
  const child = typeof key === 'string' ? def.shape?.[key] : undefined;
  return child ? [child] : [];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
