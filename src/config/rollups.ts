/** The configured rollups: each one's pure definition beside the config it came from, checked at start-up. */
import { type Config, ConfigError, type RollupConfig } from '../config.js';
import { defineRollup, type Rollup, RollupDefinitionError } from '../core/rollup.js';

/**
 * A configured rollup: its pure definition and the config it came from (target included). Shared by
 * the scheduler, the HTTP API and the CLI, so it lives on the config side, below all three.
 */
export interface RollupRuntime {
  readonly rollup: Rollup;
  readonly config: RollupConfig;
}

/** Builds every configured rollup, or fails start-up naming the field and what is wrong. */
export function defineRollups(config: Config): RollupRuntime[] {
  const declared = new Map(config.assets.map((a) => [a.name, a.domain]));
  return config.rollups.map((spec) => {
    const at = (field: string) => `rollups[${spec.id}].${field}`;
    try {
      const rollup = defineRollup(spec);
      if (rollup.domain === 'integer' && spec.target.type === 'airflow') {
        throw new RollupDefinitionError(
          'target',
          'an airflow target needs a time rollup (a data interval of instants)',
        );
      }
      for (const asset of rollup.upstream) {
        const domain = declared.get(asset);
        if (domain && domain !== rollup.domain) {
          throw new RollupDefinitionError(
            'upstream',
            `asset ${asset} is declared ${domain} but this rollup is ${rollup.domain}`,
          );
        }
      }
      return { rollup, config: spec };
    } catch (error) {
      if (error instanceof RollupDefinitionError)
        throw new ConfigError(`invalid configuration:\n  ${at(error.field)}: ${error.message}`);
      throw error;
    }
  });
}
