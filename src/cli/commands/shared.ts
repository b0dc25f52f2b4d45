import { type Config, loadConfig } from '../../config.js';
import { type ConnectOptions, connect, type Sql } from '../../index/db.js';

export interface GlobalOptions {
  readonly config?: string | undefined;
}

export function configFrom(values: GlobalOptions): Config {
  return loadConfig({ path: values.config });
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
