import { ensureDatabase } from '../../store/pg/db.js';
import { latestVersion, migrate } from '../../store/upkeep/migrate.js';
import { createLogger } from '../../support/log.js';
import { commandConfig, type GlobalOptions, withSql } from './shared.js';

export async function runMigrate(values: GlobalOptions): Promise<number> {
  const config = await commandConfig(values);
  const log = createLogger(config.log_level);
  await ensureDatabase(config.database_url, log);
  const applied = await withSql(config, (sql) => migrate(sql, log));
  process.stdout.write(
    applied.length > 0
      ? `applied migrations ${applied.join(', ')}; schema at version ${latestVersion()}\n`
      : `schema already at version ${latestVersion()}\n`,
  );
  return 0;
}
