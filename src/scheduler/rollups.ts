import { type Config, ConfigError, type RollupConfig } from '../config.js';
import { defineRollup, type Rollup, RollupDefinitionError } from '../core/rollup.js';

/** A configured rollup: its pure definition and the config it came from (target included). */
export interface RollupRuntime {
  readonly rollup: Rollup;
  readonly config: RollupConfig;
}

import { envReferences } from './targets/secrets.js';

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

/**
 * Fails start-up of a scheduling instance when a target refers to an unset environment variable:
 * it could deliver nothing to that target until restarted with it. Instances that do not schedule
 * (and CLI commands) need no target secrets. Deliveries check again, for decisions made for a
 * target of an earlier config.
 */
export function checkSecretEnv(config: Config, env: NodeJS.ProcessEnv): void {
  const missing = config.rollups.flatMap((spec) =>
    envReferences(spec.target)
      .filter(({ name }) => env[name] === undefined || env[name] === '')
      .map(
        ({ field, name }) => `  rollups[${spec.id}].target.${field}: environment variable ${name} is not set`,
      ),
  );
  if (missing.length > 0) throw new ConfigError(`invalid configuration:\n${missing.join('\n')}`);
}
