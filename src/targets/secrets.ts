/**
 * A target's secrets, by the fields its type declares (TargetType.secrets): literal secrets never
 * reach PostgreSQL, references are resolved at each delivery, and nothing sent reaches an error.
 */
import type { EnvRef, Secret } from '../support/fields.js';
import { type TargetConfig, targetType } from './registry.js';
import type { SecretKind, WithSecrets } from './target.js';

export type { EnvRef } from '../support/fields.js';

/** What a literal secret from the config file becomes in PostgreSQL: a placeholder. */
export interface Redacted {
  readonly redacted: true;
}

/**
 * As stored in `rollups.definition`, `triggers.target` and `repair_requests.target`: references
 * and placeholders in place of secrets (identities, such as a user name, may stay literal).
 */
export type StoredTarget = WithSecrets<TargetConfig, EnvRef | Redacted>;
/** Ready to deliver: every secret is a value. Lives in memory only. */
export type ResolvedTarget = WithSecrets<TargetConfig, never>;

export class SecretUnavailableError extends Error {
  override readonly name = 'SecretUnavailableError';
}

/** The form to store: literal secrets become `{redacted: true}`, references stay references. */
export function redactTarget(target: TargetConfig): StoredTarget {
  return mapSecrets(target, (value: Secret) =>
    typeof value === 'string' ? { redacted: true } : value,
  ) as StoredTarget;
}

/**
 * The stored target with its secrets filled in. References are read from `env`; placeholders of
 * literal secrets come from the live config's target that stores identically (same URL, DAG,
 * user and header names), so a secret is only ever sent where the config file sends it. Throws
 * SecretUnavailableError, naming what is missing, when either cannot be found.
 */
export function resolveTarget(
  stored: StoredTarget,
  live: readonly TargetConfig[],
  env: NodeJS.ProcessEnv,
): ResolvedTarget {
  let source: StoredTarget | TargetConfig = stored;
  if (hasPlaceholder(stored)) {
    const key = canonical(stored);
    const match = live.find((t) => canonical(redactTarget(t)) === key);
    if (!match) {
      throw new SecretUnavailableError(
        `the ${stored.type} target this trigger was decided for had a literal secret in the config, which is not stored, and no rollup in the current config has that target any more: restore it, or give its secrets as {env: NAME} so that older decisions stay deliverable`,
      );
    }
    source = match;
  }
  const missing: string[] = [];
  const read = (value: Secret | Redacted, field: string): string => {
    if (typeof value === 'string') return value;
    if ('redacted' in value) throw new Error('unreachable: placeholders were replaced above');
    const found = env[value.env];
    if (found === undefined || found === '') {
      missing.push(`${value.env} (${field})`);
      return '';
    }
    return found;
  };
  const resolved = mapSecrets(source, read, read) as ResolvedTarget;
  if (missing.length > 0) {
    throw new SecretUnavailableError(
      `environment variable${missing.length > 1 ? 's' : ''} ${missing.join(', ')} not set in this process`,
    );
  }
  return resolved;
}

/** The environment variables a target refers to, with the field each one fills. */
export function envReferences(target: TargetConfig): { field: string; name: string }[] {
  const refs: { field: string; name: string }[] = [];
  const note = (value: Secret, field: string) => {
    if (typeof value !== 'string') refs.push({ field, name: value.env });
    return value;
  };
  mapSecrets(target, note, note);
  return refs;
}

/** The fields of a target holding a literal secret (not an `{env: NAME}` reference). */
export function literalSecretFields(target: TargetConfig): string[] {
  const fields: string[] = [];
  mapSecrets(target, (value: Secret, field: string) => {
    if (typeof value === 'string') fields.push(field);
    return value;
  });
  return fields;
}

/** The secret values of a resolved target, for scrubbing them out of error text. */
export function secretValues(target: ResolvedTarget): string[] {
  const values: string[] = [];
  mapSecrets(target, (value: string) => {
    values.push(value);
    return value;
  });
  return values;
}

function hasPlaceholder(target: StoredTarget): boolean {
  let found = false;
  mapSecrets(target, (value: EnvRef | Redacted) => {
    if ('redacted' in value) found = true;
    return value;
  });
  return found;
}

/**
 * A copy of the target with `secret` applied to each secret (with its field's name, `headers.X`
 * for a map's entry) and `identity` to each identity (default: kept). The type's declared fields
 * keep their place, or go last in their declared order where the type says so (`secrets.last`):
 * a stored target's key order is part of its rollup's definition hash.
 */
function mapSecrets<A, B>(
  target: { readonly type: string },
  secret: (value: A, field: string) => B,
  identity: (value: A, field: string) => unknown = (value) => value,
): Record<string, unknown> {
  const declared = targetType(target.type)?.secrets ?? { fields: [], last: false };
  const source = target as Readonly<Record<string, unknown>>;
  const out: Record<string, unknown> = { ...source };
  if (declared.last) for (const [field] of declared.fields) delete out[field];
  for (const [field, kind] of declared.fields) {
    const value = source[field];
    if (value !== undefined) out[field] = mapped(kind, value, field, secret, identity);
  }
  return out;
}

function mapped<A, B>(
  kind: SecretKind,
  value: unknown,
  field: string,
  secret: (value: A, field: string) => B,
  identity: (value: A, field: string) => unknown,
): unknown {
  if (kind === 'secret') return secret(value as A, field);
  if (kind === 'identity') return identity(value as A, field);
  return Object.fromEntries(
    Object.entries(value as Record<string, A>).map(([name, v]) => [name, secret(v, `${field}.${name}`)]),
  );
}

/** JSON with sorted keys: jsonb reorders keys, so stored and freshly redacted targets compare this way. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}
