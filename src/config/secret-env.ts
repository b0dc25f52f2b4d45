/** Start-up's check that every secret the targets read from the environment is there. */
import { envReferences } from '../targets/secrets.js';
import { ConfigError } from './errors.js';
import type { Config } from './schema.js';

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
