/**
 * The catalog of rollups: the config file's and those written through the API, checked together as
 * one config (ids, chains, cycles, domains, Cluster prefixes), so an API rollup gets the file's own
 * schema and error messages. Pure: the caller reads the file and the stored rows.
 */
import { z } from 'zod';
import { graphProblems } from '../core/rollups/graph.js';
import { ConfigError, describeIssues } from './errors.js';
import { rollupSchema } from './rollup-schema.js';
import { defineRollups, type RollupRuntime } from './rollups.js';
import { type Config, clusterTargetProblems, type RollupConfig } from './schema.js';

/** Where a rollup is defined: the config file, or `PUT /v1/rollups/{id}`. */
export type RollupOrigin = 'file' | 'api';

/** A rollup written through the API, as stored: its body as sent, who wrote it and when. */
export interface ApiRollup {
  readonly id: string;
  readonly definition: unknown;
  readonly writtenBy: string;
  readonly writtenAt: Date;
}

export interface CatalogEntry {
  readonly runtime: RollupRuntime;
  readonly source: RollupOrigin;
  /** For an API rollup: who wrote it and when. */
  readonly written?: { readonly by: string; readonly at: Date };
  /** For an API rollup: its definition's JSON text, by which an unchanged one is not parsed again. */
  readonly text?: string;
}

/** One version of the catalog; never changed, replaced by the next. File rollups first, in file order. */
export class Catalog {
  readonly rollups: readonly RollupRuntime[];
  private readonly byId: ReadonlyMap<string, CatalogEntry>;

  constructor(
    readonly entries: readonly CatalogEntry[],
    /** The config the file rollups came with (its other settings are read at start only). */
    readonly config: Config,
  ) {
    this.rollups = entries.map((e) => e.runtime);
    this.byId = new Map(entries.map((e) => [e.runtime.rollup.id, e]));
  }

  get(id: string): RollupRuntime | undefined {
    return this.byId.get(id)?.runtime;
  }

  entry(id: string): CatalogEntry | undefined {
    return this.byId.get(id);
  }
}

/** Read by the scheduler, the API and the metrics: the catalog now, and a word when it changes. */
export interface RollupCatalog {
  current(): Catalog;
  /** Called after each change, in the process that made it or learnt of it. */
  onChange(listener: (next: Catalog, previous: Catalog) => void): void;
}

/** Why a write of the catalog is refused, as the API answers it. */
export class CatalogRefusal extends Error {
  constructor(
    readonly status: 404 | 409 | 422,
    readonly code: string,
    message: string,
    readonly errors: readonly string[] = [],
  ) {
    super(message);
  }
}

export interface ReloadResult {
  readonly change: CatalogChange;
  readonly unchanged: number;
  /** Settings of the file besides rollups that differ from the running ones: they need a restart. */
  readonly restartRequired: readonly string[];
}

/** What a PUT did, or would do under dry_run. */
export interface PutResult {
  readonly change: 'added' | 'changed' | 'unchanged';
  /** created: a new rollup's periods, from its begin; rebuilt: a new calendar; reevaluated: a new policy. */
  readonly periods: {
    readonly action: 'created' | 'rebuilt' | 'reevaluated' | 'none';
    readonly untriggered: number;
  };
  readonly target: { readonly type: string; readonly changed: boolean };
  readonly written?: ApiRollup;
}

/** The catalog the daemon runs: read as any, changed by a reload and the API's writes. */
/**
 * Records a write of an API rollup inside its transaction: its definition before and after (null:
 * none). `db` is the store's transaction, typed unknown here since config/ does not import store/.
 */
export type CatalogAudit = (db: unknown, before: unknown, after: unknown) => Promise<void>;

export interface EditableCatalog extends RollupCatalog {
  /** Reads the config file again; throws CatalogRefusal, or ConfigError (nothing changed) with every problem. */
  reload(): Promise<ReloadResult>;
  /**
   * Writes an API rollup (under dryRun: says what it would change); throws CatalogRefusal. `audit`
   * records the write, given the write's transaction and the definitions before and after.
   */
  put(id: string, definition: unknown, by: string, dryRun: boolean, audit?: CatalogAudit): Promise<PutResult>;
  /** Deletes an API rollup; throws CatalogRefusal. */
  remove(id: string, by: string, audit?: CatalogAudit): Promise<{ removed: ApiRollup }>;
  /** A rollup as written (the file's entry, or the API's body), literal secrets redacted. */
  definition(
    id: string,
  ):
    | { readonly source: RollupOrigin; readonly definition: unknown; readonly written?: ApiRollup }
    | undefined;
}

/** The API's rollups as the config's `rollups:` list: the schema that names their fields. */
const apiSchema = z.strictObject({ rollups: z.array(rollupSchema) });

/**
 * The catalog of the file's rollups (`file`, already checked as a config) and the API's, checked
 * together; throws ConfigError with every problem, each field named by its rollup's id, in the
 * config's own words. A rollup unchanged from `previous` keeps its object, so readers tell changed
 * ones by identity. An API rollup whose id the file defines too is a problem: the file's is never
 * overwritten.
 */
export function buildCatalog(
  file: { readonly config: Config; readonly origin: string },
  api: readonly ApiRollup[],
  previous?: Catalog,
): Catalog {
  const heading = `invalid configuration (${file.origin} and the rollups written through the API):`;
  const fileRollups = file.config.rollups;
  const fileIds = new Set(fileRollups.map((r) => r.id));
  const problems = api
    .filter((a) => fileIds.has(a.id))
    .map(
      (a) =>
        `  rollups[${a.id}].id: defined in the config file and through the API (written by ${a.writtenBy} at ${a.writtenAt.toISOString()}): remove one (DELETE /v1/rollups/${a.id} for the API's)`,
    );
  const parsed = api.map((a) => parseApiRollup(a, previous));
  for (const p of parsed) if ('problems' in p) problems.push(...p.problems);
  const all = [...fileRollups, ...parsed.flatMap((p) => ('config' in p ? [p.config] : []))];
  if (problems.length === 0) {
    const name = (index: number) => `rollups[${all[index]?.id ?? index}]`;
    for (const p of graphProblems(all)) problems.push(`  ${name(p.index)}.${p.field}: ${p.message}`);
    for (const p of clusterTargetProblems(file.config, all))
      problems.push(`  ${name(p.index)}.target.prefix: ${p.message}`);
  }
  if (problems.length > 0) throw new ConfigError(`${heading}\n${problems.join('\n')}`);
  const known = previous ? new Map(previous.rollups.map((r) => [r.rollup.id, r])) : undefined;
  const runtimes =
    api.length === 0 ? defineRollups(file.config, file.origin, known) : defineAll(file, all, heading, known);
  const written = new Map(api.map((a, i) => [a.id, { a, text: (parsed[i] as { text: string }).text }]));
  const entries = runtimes.map((runtime, i): CatalogEntry => {
    if (i < fileRollups.length) return { runtime, source: 'file' };
    const w = written.get(runtime.rollup.id)!;
    return { runtime, source: 'api', written: { by: w.a.writtenBy, at: w.a.writtenAt }, text: w.text };
  });
  return new Catalog(entries, file.config);
}

/**
 * One API rollup through the config's rollup schema (its errors named `rollups[<id>]`), or the
 * previous catalog's config for it when its definition is the same text: a catalog of a thousand
 * API rollups is not parsed again for each write.
 */
function parseApiRollup(
  a: ApiRollup,
  previous: Catalog | undefined,
): { config: RollupConfig; text: string } | { problems: string[] } {
  const text = JSON.stringify(a.definition);
  const before = previous?.entry(a.id);
  if (before?.text === text) return { config: before.runtime.config, text };
  const raw = { rollups: [a.definition] };
  const result = apiSchema.safeParse(raw);
  if (!result.success) return { problems: describeIssues(result.error.issues, raw, apiSchema, new Map()) };
  return { config: result.data.rollups[0]!, text };
}

/** defineRollups over the file's and the API's rollups together, its errors under `heading`. */
function defineAll(
  file: { readonly config: Config; readonly origin: string },
  all: readonly RollupConfig[],
  heading: string,
  known: ReadonlyMap<string, RollupRuntime> | undefined,
): RollupRuntime[] {
  try {
    return defineRollups({ ...file.config, rollups: [...all] }, file.origin, known);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    throw new ConfigError(`${heading}\n${error.message.split('\n').slice(1).join('\n')}`);
  }
}

/** What changed between two catalogs, by rollup id, in the newer one's order (removed: the older's). */
export interface CatalogChange {
  readonly added: readonly string[];
  readonly changed: readonly string[];
  readonly removed: readonly string[];
}

export function catalogChange(previous: Catalog, next: Catalog): CatalogChange {
  const added: string[] = [];
  const changed: string[] = [];
  for (const { rollup } of next.rollups) {
    const before = previous.get(rollup.id);
    if (before === undefined) added.push(rollup.id);
    else if (before !== next.get(rollup.id)) changed.push(rollup.id);
  }
  const removed = previous.rollups.map((r) => r.rollup.id).filter((id) => next.get(id) === undefined);
  return { added, changed, removed };
}

/**
 * Whether the new definition puts its periods on another grid (every, zone, origin, begin): its
 * untriggered periods are then rebuilt rather than re-evaluated, as at start (store/rollups.ts).
 */
export function calendarChanged(before: RollupRuntime, after: RollupRuntime): boolean {
  return calendarKey(before) !== calendarKey(after);
}

function calendarKey({ rollup }: RollupRuntime): string {
  const { every, timezone, origin } = rollup.calendar;
  return JSON.stringify([every, timezone, origin, rollup.begin]);
}

/**
 * The top-level settings besides `rollups` that differ between two configs: a reload does not
 * apply them (a restart does), and says so.
 */
export function settingsNeedingRestart(before: Config, after: Config): string[] {
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  keys.delete('rollups');
  return [...keys]
    .filter(
      (k) =>
        JSON.stringify((before as Record<string, unknown>)[k]) !==
        JSON.stringify((after as Record<string, unknown>)[k]),
    )
    .sort();
}
