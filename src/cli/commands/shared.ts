import { type Config, loadConfig } from '../../config/index.js';
import { resolveDatabase } from '../../embedded/resolve.js';
import { type ConnectOptions, connect, type Sql } from '../../store/pg/db.js';
import { dataDirOf, lookUpRecord } from '../../support/daemon-record.js';
import { createLogger, redactUrl } from '../../support/log.js';
import { onRelease } from '../releases.js';

export interface GlobalOptions {
  readonly config?: string | undefined;
}

export function configFrom(values: GlobalOptions): Config {
  return loadConfig({ path: values.config });
}

/** The embedded server's data directory, when commandConfig resolved to one. */
let embeddedDir: string | undefined;

/**
 * The config of a one-shot command, its database_url resolved: with the embedded default, the
 * server of data_dir (started for this command when no daemon runs it; stopped by main when the command ends).
 */
export async function commandConfig(values: GlobalOptions): Promise<Config> {
  const config = configFrom({ config: values.config ?? recordedConfig() });
  // Quiet: a command's output is its answer; the server's start is reported only when it fails.
  const resolved = await resolveDatabase(config, createLogger('warn'), 'command');
  onRelease(resolved.release);
  embeddedDir = resolved.embedded?.dataDir;
  return resolved.config;
}

/**
 * The config file of the daemon recorded in the data directory, for a command given none (`prune`
 * and `migrate` in the daemon's directory act with its retention and database settings).
 */
function recordedConfig(): string | undefined {
  if (process.env.COVERAGE_ROLLUP_CONFIG) return undefined;
  const found = lookUpRecord(dataDirOf());
  return found.kind === 'live' ? (found.record.config ?? undefined) : undefined;
}

/** Runs `fn` with a short-lived connection, for one-shot commands. */
export async function withSql<T>(
  config: Config,
  fn: (sql: Sql) => Promise<T>,
  options: Pick<ConnectOptions, 'connectTimeout'> = {},
): Promise<T> {
  const sql = connect(config.database_url, { ...options, max: 2, applicationName: 'coverage-rollup-cli' });
  try {
    return await fn(sql);
  } catch (error) {
    throw (error as { code?: string }).code === UNDEFINED_TABLE ? new NotMigratedError(config, error) : error;
  } finally {
    await sql.end({ timeout: 2 });
  }
}

/** PostgreSQL's undefined_table: the commands' tables are missing, so migrations never ran here. */
const UNDEFINED_TABLE = '42P01';

/**
 * A command against a database the daemon never migrated: PostgreSQL's own words ("relation
 * "assets" does not exist") say neither what is wrong nor what to run. With the embedded default,
 * the likelier cause is a command run from another directory than the daemon's.
 */
export class NotMigratedError extends Error {
  override readonly name = 'NotMigratedError';
  constructor(config: Config, cause: unknown) {
    const where =
      embeddedDir !== undefined
        ? `the embedded database in ${embeddedDir} has no coverage-rollup tables; run the command from the directory the daemon runs in (or set COVERAGE_ROLLUP_DATA_DIR to its data directory), or start the daemon once here (npm start)`
        : `the database ${redactUrl(config.database_url)} has no coverage-rollup tables; run coverage-rollup migrate, or start the daemon once against it`;
    super(`${where} (${(cause as Error).message})`, { cause });
  }
}
