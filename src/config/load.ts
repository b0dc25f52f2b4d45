/** Where the config comes from: the YAML file, then environment overrides. */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { RollupDefinitionError } from '../core/rollups/rollup.js';
import { ConfigError, describeIssues, fieldName } from './errors.js';
import { rollupSchema } from './rollup-schema.js';
import { buildRollup, definitionLine } from './rollups.js';
import { type Config, configSchema } from './schema.js';

export { ConfigError } from './errors.js';

export interface ConfigSource {
  readonly path?: string | undefined;
  readonly env?: NodeJS.ProcessEnv;
}

export function loadConfig(source: ConfigSource = {}): Config {
  const { raw, origin, fromEnv } = readConfigInput(source);
  return parseConfig(raw, origin, fromEnv);
}

/** The config as read, before its schema: the file with the environment's overrides applied. */
export interface ConfigInput {
  readonly raw: unknown;
  /** The file's path, or 'defaults' without one: errors name it. */
  readonly origin: string;
  /** The fields an environment variable set, for errors that say where a value came from. */
  readonly fromEnv: ReadonlyMap<string, string>;
}

/** Reads the file (throws ConfigError when it cannot be read or is not YAML) and applies the environment. */
export function readConfigInput({ path, env = process.env }: ConfigSource = {}): ConfigInput {
  const file = path ?? env.COVERAGE_ROLLUP_CONFIG;
  const raw = file ? readYaml(file) : {};
  const fromEnv = new Map(
    Object.entries(ENV_FIELDS).filter(([, name]) => env[name] !== undefined && env[name] !== ''),
  );
  return { raw: applyEnv(raw, env), origin: file ?? 'defaults', fromEnv };
}

/** Config fields an environment variable overrides, for errors that name where a value came from. */
const ENV_FIELDS: Record<string, string> = {
  database_url: 'DATABASE_URL',
  database_read_url: 'DATABASE_READ_URL',
  redis_url: 'REDIS_URL',
  'queue.backend': 'QUEUE_BACKEND',
  data_dir: 'COVERAGE_ROLLUP_DATA_DIR',
  log_level: 'LOG_LEVEL',
  log_format: 'LOG_FORMAT',
  api_tokens: 'API_TOKENS',
  'http.port': 'PORT',
  'http.host': 'HTTP_HOST',
};

/** Every environment variable the daemon reads its configuration from. */
export const CONFIG_ENV_VARS: readonly string[] = [...Object.values(ENV_FIELDS), 'COVERAGE_ROLLUP_CONFIG'];

export function parseConfig(
  raw: unknown,
  origin = 'config',
  fromEnv: ReadonlyMap<string, string> = new Map(),
): Config {
  const result = configSchema.safeParse(raw);
  if (result.success) return result.data;
  const lines = [
    ...describeIssues(result.error.issues, raw, configSchema, fromEnv),
    ...definitionProblems(raw),
  ];
  throw new ConfigError(`invalid configuration (${origin}):\n${lines.join('\n')}`);
}

/**
 * What defineRollups would refuse in the rollups that are valid on their own (a begin its calendar
 * cannot read, a deadline on integer periods), so a file with an error elsewhere reports these too
 * rather than one error per attempt. With a valid file, defineRollups reports them.
 */
function definitionProblems(raw: unknown): string[] {
  const rollups =
    raw !== null && typeof raw === 'object' ? (raw as { rollups?: unknown }).rollups : undefined;
  if (!Array.isArray(rollups)) return [];
  return rollups.flatMap((entry, i) => {
    const parsed = rollupSchema.safeParse(entry);
    if (!parsed.success) return [];
    const built = buildRollup(parsed.data);
    return built instanceof RollupDefinitionError
      ? [definitionLine(fieldName(['rollups', i], raw), built)]
      : [];
  });
}

function readYaml(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ConfigError(`cannot read config file ${file}: ${(error as Error).message}`);
  }
  const json = readJson(text);
  if (json !== undefined) {
    const duplicate = duplicateKey(text);
    if (duplicate !== undefined)
      throw new ConfigError(
        `config file ${file} is not valid YAML: Map keys must be unique ("${duplicate}" appears twice in one mapping)`,
      );
    return json;
  }
  try {
    return parseYaml(text) ?? {};
  } catch (error) {
    throw new ConfigError(`config file ${file} is not valid YAML: ${(error as Error).message}`);
  }
}

/**
 * A config written as JSON (YAML 1.2 reads JSON as it is) is read by JSON.parse: the YAML parser
 * builds a document of every token first, about a second and 100 MB of memory for a platform-scale
 * config of 10,000 assets and 1,000 rollups, which lingered in the daemon's peak (issue 38);
 * JSON.parse takes 7 ms. Undefined when the text is not JSON (then YAML reads it).
 */
function readJson(text: string): unknown {
  if (!/^\s*\{/.test(text)) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined; // flow-style YAML, or broken: the YAML parser says which
  }
}

/**
 * The first key repeated within one object of a valid JSON text: YAML refuses a mapping with a
 * repeated key, where JSON.parse would keep the last silently.
 */
export function duplicateKey(json: string): string | undefined {
  const objects: Array<Set<string> | null> = []; // null: an array
  let expectKey = false;
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (c === 0x22) {
      let end = i + 1;
      while (json.charCodeAt(end) !== 0x22) end += json.charCodeAt(end) === 0x5c ? 2 : 1;
      if (expectKey) {
        const key = JSON.parse(json.slice(i, end + 1)) as string;
        const keys = objects.at(-1)!;
        if (keys.has(key)) return key;
        keys.add(key);
        expectKey = false;
      }
      i = end;
    } else if (c === 0x7b) {
      objects.push(new Set());
      expectKey = true;
    } else if (c === 0x5b) objects.push(null);
    else if (c === 0x7d || c === 0x5d) objects.pop();
    else if (c === 0x2c) expectKey = objects.at(-1) != null;
  }
  return undefined;
}

/**
 * The YAML parser, loaded only for a file that is YAML: a one-shot command without a config file
 * (or with a JSON one) does not pay its load (about 40 ms). Synchronous, as loading is.
 */
function parseYaml(text: string): unknown {
  const yaml = createRequire(import.meta.url)('yaml') as typeof import('yaml');
  return yaml.parse(text);
}

function applyEnv(raw: unknown, env: NodeJS.ProcessEnv): unknown {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return raw;
  const out: Record<string, unknown> = { ...(raw as Record<string, unknown>) };
  // An empty variable counts as unset, as compose files' `PORT=${PORT}` leave it.
  if (env.DATABASE_URL) out.database_url = env.DATABASE_URL;
  if (env.DATABASE_READ_URL) out.database_read_url = env.DATABASE_READ_URL;
  if (env.REDIS_URL) out.redis_url = env.REDIS_URL;
  if (env.COVERAGE_ROLLUP_DATA_DIR) out.data_dir = env.COVERAGE_ROLLUP_DATA_DIR;
  if (env.QUEUE_BACKEND) {
    out.queue = {
      ...((out.queue as object | undefined) ?? {}),
      backend: env.QUEUE_BACKEND.trim().toLowerCase(),
    };
  }
  if (env.LOG_LEVEL) out.log_level = env.LOG_LEVEL;
  if (env.LOG_FORMAT) out.log_format = env.LOG_FORMAT.trim().toLowerCase();
  if (env.API_TOKENS) {
    out.api_tokens = env.API_TOKENS.split(',')
      .map((t) => t.trim())
      .filter(Boolean);
  }
  if (env.PORT) {
    const port = /^-?\d+$/.test(env.PORT.trim()) ? Number(env.PORT) : env.PORT;
    out.http = { ...((out.http as object | undefined) ?? {}), port };
  }
  if (env.HTTP_HOST) out.http = { ...((out.http as object | undefined) ?? {}), host: env.HTTP_HOST.trim() };
  return out;
}
