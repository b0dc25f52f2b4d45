/** The configured rollups: each one's pure definition beside the config it came from, checked at start-up. */

import { defineRollup, type Rollup, RollupDefinitionError } from '../core/rollups/rollup.js';
import { followRules, targetType } from '../targets/registry.js';
import { ConfigError } from './errors.js';
import type { Config, RollupConfig } from './schema.js';

/**
 * A configured rollup: its pure definition and the config it came from (target included). Shared by
 * the scheduler, the HTTP API and the CLI, so it lives on the config side, below all three.
 */
export interface RollupRuntime {
  readonly rollup: Rollup;
  readonly config: RollupConfig;
}

/**
 * Builds every configured rollup, or fails start-up naming, for every rollup that cannot be built,
 * the field and what is wrong (all of them at once, not the first). An output asset takes its
 * rollup's domain, so an upstream that is another rollup's output must be in the reader's domain,
 * as must a declared asset.
 */
export function defineRollups(
  config: Config,
  origin?: string,
  /** Rollups already built (a running catalog's): one whose config is the same is taken as it is. */
  known?: ReadonlyMap<string, RollupRuntime>,
): RollupRuntime[] {
  const heading = origin === undefined ? 'invalid configuration:' : `invalid configuration (${origin}):`;
  const problems: string[] = [];
  const say = (i: number, error: RollupDefinitionError) =>
    problems.push(definitionLine(`rollups[${config.rollups[i]!.id}]`, error));
  const defined: Array<{ readonly index: number; readonly runtime: RollupRuntime }> = [];
  config.rollups.forEach((spec, index) => {
    const before = known?.get(spec.id);
    if (before !== undefined && sameConfig(before.config, spec)) {
      defined.push({ index, runtime: before });
      return;
    }
    const built = buildRollup(spec);
    if (built instanceof RollupDefinitionError) say(index, built);
    else defined.push({ index, runtime: { rollup: built, config: spec } });
  });
  const declared = new Map(config.assets.map((a) => [a.name, a.domain]));
  const written = new Map(
    defined.flatMap(({ runtime: { rollup } }) => (rollup.output ? [[rollup.output, rollup] as const] : [])),
  );
  for (const { index, runtime } of defined) {
    const { rollup } = runtime;
    const output = rollup.output;
    const domain = output === undefined ? undefined : declared.get(output);
    if (domain && domain !== rollup.domain) {
      say(
        index,
        new RollupDefinitionError(
          'output',
          `asset ${output} is declared ${domain} but this rollup is ${rollup.domain}`,
        ),
      );
    }
    for (const asset of rollup.upstream) {
      const domain = declared.get(asset);
      if (domain && domain !== rollup.domain) {
        say(
          index,
          new RollupDefinitionError(
            'upstream',
            `asset ${asset} is declared ${domain} but this rollup is ${rollup.domain}`,
          ),
        );
      }
      const writer = written.get(asset);
      if (writer && writer.domain !== rollup.domain) {
        say(
          index,
          new RollupDefinitionError(
            'upstream',
            `asset ${asset} is the output of ${writer.domain} rollup ${writer.id} but this rollup is ${rollup.domain}`,
          ),
        );
      }
    }
  }
  if (problems.length > 0) throw new ConfigError(`${heading}\n${problems.join('\n')}`);
  return defined.map((d) => d.runtime);
}

/** Whether two rollup configs are the same (as parsed: durations in ms, defaults filled in). */
function sameConfig(a: RollupConfig, b: RollupConfig): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

/** One rollup's definition, or why it cannot be built (the field, and what is wrong with it). */
export function buildRollup(spec: RollupConfig): Rollup | RollupDefinitionError {
  try {
    // The target module says whether its runs can be followed (its `follow`); the rollup's
    // run.outcome, checked against that, says how its runs end.
    const followed = followRules(spec.target.type) !== null;
    const rollup = defineRollup(spec, { type: spec.target.type, followed });
    const problem = targetType(spec.target.type)?.rollupProblem?.(spec.target, rollup.domain);
    if (problem) throw new RollupDefinitionError(problem.field, problem.message);
    if (rollup.domain === 'integer' && spec.repair !== undefined) {
      throw new RollupDefinitionError(
        'repair',
        "repair requests are timed from a period's end: they need a time rollup (request integer ranges by hand with coverage-rollup repair)",
      );
    }
    return rollup;
  } catch (error) {
    if (error instanceof RollupDefinitionError) return error;
    throw error;
  }
}

/** `  rollups[orders_daily].begin: message`, the field named once. */
export function definitionLine(rollup: string, error: RollupDefinitionError): string {
  // Some messages start with their own field's name ("every: ..."): said once is enough.
  const name = `${error.field.split('.').at(-1)}: `;
  const message = error.message.startsWith(name) ? error.message.slice(name.length) : error.message;
  return `  ${rollup}.${error.field}: ${message}`;
}
