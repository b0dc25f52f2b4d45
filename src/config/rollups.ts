/** The configured rollups: each one's pure definition beside the config it came from, checked at start-up. */

import { defineRollup, type Rollup, RollupDefinitionError } from '../core/rollups/rollup.js';
import { targetType } from '../targets/registry.js';
import { type Config, ConfigError, type RollupConfig } from './index.js';

/**
 * A configured rollup: its pure definition and the config it came from (target included). Shared by
 * the scheduler, the HTTP API and the CLI, so it lives on the config side, below all three.
 */
export interface RollupRuntime {
  readonly rollup: Rollup;
  readonly config: RollupConfig;
}

/**
 * Builds every configured rollup, or fails start-up naming the field and what is wrong. An
 * output asset takes its rollup's domain, so an upstream that is another rollup's output must be
 * in the reader's domain, as must a declared asset.
 */
export function defineRollups(config: Config, origin?: string): RollupRuntime[] {
  const at = (i: number, field: string) => `rollups[${config.rollups[i]!.id}].${field}`;
  const heading = origin === undefined ? 'invalid configuration:' : `invalid configuration (${origin}):`;
  const fail = (i: number, error: unknown): never => {
    if (error instanceof RollupDefinitionError) {
      // Some messages start with their own field's name ("every: ..."): said once is enough.
      const name = `${error.field.split('.').at(-1)}: `;
      const message = error.message.startsWith(name) ? error.message.slice(name.length) : error.message;
      throw new ConfigError(`${heading}\n  ${at(i, error.field)}: ${message}`);
    }
    throw error;
  };
  const runtimes = config.rollups.map((spec, i) => {
    try {
      const rollup = defineRollup(spec);
      const problem = targetType(spec.target.type)?.rollupProblem?.(spec.target, rollup.domain);
      if (problem) throw new RollupDefinitionError(problem.field, problem.message);
      if (rollup.domain === 'integer' && spec.repair !== undefined) {
        throw new RollupDefinitionError(
          'repair',
          "repair requests are timed from a period's end: they need a time rollup (request integer ranges by hand with coverage-rollup repair)",
        );
      }
      return { rollup, config: spec };
    } catch (error) {
      return fail(i, error);
    }
  });
  const declared = new Map(config.assets.map((a) => [a.name, a.domain]));
  const written = new Map(
    runtimes.flatMap((r) => (r.rollup.output ? [[r.rollup.output, r.rollup] as const] : [])),
  );
  runtimes.forEach(({ rollup }, i) => {
    const output = rollup.output;
    const domain = output === undefined ? undefined : declared.get(output);
    if (domain && domain !== rollup.domain) {
      fail(
        i,
        new RollupDefinitionError(
          'output',
          `asset ${output} is declared ${domain} but this rollup is ${rollup.domain}`,
        ),
      );
    }
    for (const asset of rollup.upstream) {
      const domain = declared.get(asset);
      if (domain && domain !== rollup.domain) {
        fail(
          i,
          new RollupDefinitionError(
            'upstream',
            `asset ${asset} is declared ${domain} but this rollup is ${rollup.domain}`,
          ),
        );
      }
      const writer = written.get(asset);
      if (writer && writer.domain !== rollup.domain) {
        fail(
          i,
          new RollupDefinitionError(
            'upstream',
            `asset ${asset} is the output of ${writer.domain} rollup ${writer.id} but this rollup is ${rollup.domain}`,
          ),
        );
      }
    }
  });
  return runtimes;
}
