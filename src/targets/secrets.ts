import { type Config, ConfigError, type Secret, type TargetConfig } from '../config/index.js';

/** A secret read from the environment when a delivery is made. */
export interface EnvRef {
  readonly env: string;
}

/** What a literal secret from the config file becomes in PostgreSQL: a placeholder. */
export interface Redacted {
  readonly redacted: true;
}

/**
 * A target's shape with its secrets (`S`: tokens, passwords, client secrets, header values) and
 * identities (`I`: usernames, client ids) of a given form.
 */
export type TargetWith<S, I = S> =
  | {
      readonly type: 'queue';
      readonly queue: string;
      readonly prefix?: string | undefined;
      readonly timeout?: number | undefined;
    }
  | {
      readonly type: 'webhook';
      readonly url: string;
      readonly headers: Readonly<Record<string, S>>;
      readonly timeout: number;
    }
  | {
      readonly type: 'airflow';
      readonly url: string;
      readonly dag_id: string;
      readonly token?: S | undefined;
      readonly username?: I | undefined;
      readonly password?: S | undefined;
      readonly client_id?: I | undefined;
      readonly client_secret?: S | undefined;
      readonly timeout: number;
      readonly partitioned?: boolean | undefined;
      readonly partition_key_format?: string | undefined;
      readonly partition_timezone?: string | undefined;
    }
  | {
      readonly type: 'airflow_asset';
      readonly url: string;
      readonly asset?: string | undefined;
      readonly asset_uri?: string | undefined;
      readonly token?: S | undefined;
      readonly username?: I | undefined;
      readonly password?: S | undefined;
      readonly client_id?: I | undefined;
      readonly client_secret?: S | undefined;
      readonly timeout: number;
      readonly partition_key_format: string;
      readonly partition_timezone?: string | undefined;
      readonly follow_dag_id?: string | undefined;
    }
  | {
      readonly type: 'dagster';
      readonly url: string;
      readonly asset_key: readonly string[];
      readonly partition_format?: string | undefined;
      readonly token?: S | undefined;
      readonly headers: Readonly<Record<string, S>>;
      readonly timeout: number;
    };

/** As stored in `rollups.definition` and `triggers.target`: references and placeholders only. */
export type StoredTarget = TargetWith<EnvRef | Redacted, string | EnvRef>;
/** Ready to deliver: every secret is a value. Lives in memory only. */
export type ResolvedTarget = TargetWith<string>;

export class SecretUnavailableError extends Error {
  override readonly name = 'SecretUnavailableError';
}

/** The form to store: literal secrets become `{redacted: true}`, references stay references. */
export function redactTarget(target: TargetConfig): StoredTarget {
  return mapSecrets<Secret, EnvRef | Redacted, Secret, string | EnvRef>(target, redactSecret, (v) => v);
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
  let source: TargetWith<Secret | Redacted> = stored;
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
  const resolved = mapSecrets<Secret | Redacted, string, Secret | Redacted, string>(source, read, read);
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
  mapSecrets<Secret, Secret, Secret, Secret>(target, note, note);
  return refs;
}

/** The secret values of a resolved target, for scrubbing them out of error text. */
export function secretValues(target: ResolvedTarget): string[] {
  const values: string[] = [];
  const note = (value: string) => {
    values.push(value);
    return value;
  };
  mapSecrets<string, string, string, string>(target, note, (v) => v);
  return values;
}

/**
 * Replaces every occurrence of a secret (4 characters or more: shorter ones would garble the
 * text and protect nothing) in an error that is about to be logged and stored in `last_error`.
 * A server that echoes request headers into its error body must not put them into the database.
 */
export function scrubSecrets(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) if (s.length >= 4) out = out.split(s).join('[redacted]');
  return out;
}

function redactSecret(value: Secret): EnvRef | Redacted {
  return typeof value === 'string' ? { redacted: true } : { env: value.env };
}

function hasPlaceholder(target: StoredTarget): boolean {
  let found = false;
  const note = (value: EnvRef | Redacted) => {
    if ('redacted' in value) found = true;
    return value;
  };
  mapSecrets(target, note, (v) => v);
  return found;
}

/** Applies `secret` to each secret field (with its name) and `identity` to usernames and client ids. */
function mapSecrets<S, S2, I, I2>(
  target: TargetWith<S, I>,
  secret: (value: S, field: string) => S2,
  identity: (value: I, field: string) => I2,
): TargetWith<S2, I2> {
  const opt = <A, B>(value: A | undefined, field: string, f: (v: A, field: string) => B) =>
    value === undefined ? {} : { [field]: f(value, field) };
  switch (target.type) {
    case 'queue':
      return target;
    case 'webhook':
      return {
        ...target,
        headers: Object.fromEntries(
          Object.entries(target.headers).map(([name, value]) => [name, secret(value, `headers.${name}`)]),
        ),
      };
    case 'dagster': {
      const { token, headers, ...rest } = target;
      return {
        ...rest,
        headers: Object.fromEntries(
          Object.entries(headers).map(([name, value]) => [name, secret(value, `headers.${name}`)]),
        ),
        ...opt(token, 'token', secret),
      };
    }
    case 'airflow':
    case 'airflow_asset': {
      const { token, username, password, client_id, client_secret, ...rest } = target;
      return {
        ...rest,
        ...opt(token, 'token', secret),
        ...opt(username, 'username', identity),
        ...opt(password, 'password', secret),
        ...opt(client_id, 'client_id', identity),
        ...opt(client_secret, 'client_secret', secret),
      };
    }
  }
}

/** JSON with sorted keys: jsonb reorders keys, so stored and freshly redacted targets compare this way. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

/**
 * Fails start-up of a scheduling instance when a target refers to an unset environment variable:
 * it could deliver nothing to that target until restarted with it. Instances that do not schedule
 * (and CLI commands) need no target secrets. Deliveries check again, for decisions made for a
 * target of an earlier config.
 */
export function checkSecretEnv(config: Config, env: NodeJS.ProcessEnv): void {
  const missing = config.rollups.flatMap((spec) =>
    [
      ...envReferences(spec.target).map((ref) => ({ ...ref, at: 'target' })),
      ...(spec.repair
        ? envReferences(spec.repair.target).map((ref) => ({ ...ref, at: 'repair.target' }))
        : []),
    ]
      .filter(({ name }) => env[name] === undefined || env[name] === '')
      .map(
        ({ at, field, name }) =>
          `  rollups[${spec.id}].${at}.${field}: environment variable ${name} is not set`,
      ),
  );
  if (missing.length > 0) throw new ConfigError(`invalid configuration:\n${missing.join('\n')}`);
}
