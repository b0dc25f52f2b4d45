import { type Config, loadConfig } from '../../config/index.js';
import { resolveDatabase } from '../../embedded/resolve.js';
import { type ConnectOptions, connect, type Sql } from '../../store/pg/db.js';
import { createLogger } from '../../support/log.js';

export interface GlobalOptions {
  readonly config?: string | undefined;
}

export function configFrom(values: GlobalOptions): Config {
  return loadConfig({ path: values.config });
}

const releases: Array<() => Promise<void>> = [];

/**
 * The config of a one-shot command, its database_url resolved: with the embedded default, the
 * server of data_dir (started for this command when no daemon runs it; see releaseEmbedded).
 */
export async function commandConfig(values: GlobalOptions): Promise<Config> {
  const config = configFrom(values);
  // Quiet: a command's output is its answer; the server's start is reported only when it fails.
  const resolved = await resolveDatabase(config, createLogger('warn'), 'command');
  releases.push(resolved.release);
  return resolved.config;
}

/** Stops an embedded server a command started for itself (main calls it once the command ends). */
export async function releaseEmbedded(): Promise<void> {
  for (const release of releases.splice(0)) await release();
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
  } finally {
    await sql.end({ timeout: 2 });
  }
}
