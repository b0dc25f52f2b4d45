/**
 * The catalog one instance holds: the config file's rollups and the API's, checked as one catalog
 * (a bad one changes nothing), swapped in at once and told to the listeners (the scheduler
 * applies it at its next pass). No database here: live-catalog.ts reads and writes `api_rollups`
 * and the notifications, and hands this the rows.
 */

import {
  type ApiRollup,
  buildCatalog,
  type Catalog,
  type CatalogChange,
  CatalogRefusal,
  catalogChange,
  type ReloadResult,
  settingsNeedingRestart,
} from '../config/catalog.js';
import {
  type Config,
  ConfigError,
  type ConfigSource,
  parseConfig,
  readConfigInput,
} from '../config/index.js';
import { checkSecretEnv } from '../config/secret-env.js';
import type { Metrics } from '../metrics/registry.js';
import type { Logger } from '../support/log.js';
import { redactTarget } from '../targets/secrets.js';

export interface CatalogStateOptions {
  readonly log: Logger;
  readonly metrics: Metrics;
  /** The config file reload reads again; absent: nothing to reload (a daemon started from a config object). */
  readonly file?: ConfigSource | undefined;
  /** The config the daemon started with (its rollups are the file's). */
  readonly config: Config;
  /** Where its rollups came from, for errors. */
  readonly origin: string;
  /** Whether this instance schedules: then every target secret it reads from the environment must be set. */
  readonly schedules: boolean;
}

export class CatalogState {
  private catalog: Catalog;
  private file: { config: Config; origin: string };
  private api = new Map<string, ApiRollup>();
  private readonly listeners: Array<(next: Catalog, previous: Catalog) => void> = [];
  /** The file's rollups as written, by id (as parsed when the daemon has no file). */
  private written: ReadonlyMap<string, unknown>;
  /**
   * The file's settings as last read, before start resolved them (an embedded database's URL):
   * what a reload compares with to say which changed settings need a restart.
   */
  private baseline: Config;

  constructor(private readonly options: CatalogStateOptions) {
    this.file = { config: options.config, origin: options.origin };
    this.catalog = buildCatalog(this.file, []);
    this.written = writtenRollups(options.config.rollups);
    this.baseline = options.config;
    if (options.file) {
      try {
        const input = readConfigInput(options.file);
        this.written = writtenRollups(input.raw);
        this.baseline = parseConfig(input.raw, input.origin, input.fromEnv);
      } catch {
        // read at start a moment ago; the parsed form stands in
      }
    }
  }

  current(): Catalog {
    return this.catalog;
  }

  /** Where the file's rollups came from, for refusals. */
  fileOrigin(): string {
    return this.file.origin;
  }

  /** The API rollup `id` as this instance last read it. */
  apiRollup(id: string): ApiRollup | undefined {
    return this.api.get(id);
  }

  /** Every API rollup as this instance last read them. */
  apiRollups(): ApiRollup[] {
    return [...this.api.values()];
  }

  definition(id: string) {
    const entry = this.catalog.entry(id);
    if (entry === undefined) return undefined;
    if (entry.source === 'file')
      return { source: 'file' as const, definition: redacted(this.written.get(id) ?? entry.runtime.config) };
    const written = this.api.get(id);
    return { source: 'api' as const, definition: written?.definition, ...(written ? { written } : {}) };
  }

  onChange(listener: (next: Catalog, previous: Catalog) => void): void {
    this.listeners.push(listener);
  }

  /** The catalog these API rollups make beside the current file, or a refusal naming every problem. */
  check(api: readonly ApiRollup[]): Catalog {
    try {
      const next = buildCatalog(this.file, api, this.catalog);
      if (this.options.schedules)
        checkSecretEnv({ ...next.config, rollups: next.rollups.map((r) => r.config) }, process.env);
      return next;
    } catch (error) {
      if (error instanceof ConfigError)
        throw new CatalogRefusal(
          422,
          'invalid_rollup',
          'the rollup does not fit the catalog',
          errorLines(error),
        );
      throw error;
    }
  }

  /** Reads and checks the file with the API rollups held; swaps it in when it is good. */
  reloadFile(): ReloadResult {
    const { file } = this.options;
    if (file === undefined)
      throw new ConfigError('no config file to reload: this daemon was started without one (--config)');
    const input = readConfigInput(file);
    const config = parseConfig(input.raw, input.origin, input.fromEnv);
    const next = buildCatalog({ config, origin: input.origin }, [...this.api.values()], this.catalog);
    if (this.options.schedules)
      checkSecretEnv({ ...config, rollups: next.rollups.map((r) => r.config) }, process.env);
    const restartRequired = settingsNeedingRestart(this.baseline, config);
    const change = this.replace(next, { config, origin: input.origin });
    this.written = writtenRollups(input.raw);
    this.options.metrics.configReloads.inc({ result: 'ok' });
    const unchanged = next.rollups.length - change.added.length - change.changed.length;
    this.options.log.info(
      { ...change, unchanged, ...(restartRequired.length > 0 ? { restart_required: restartRequired } : {}) },
      restartRequired.length > 0
        ? 'config reloaded: rollups applied; the other changed settings need a restart'
        : 'config reloaded',
    );
    return { change, unchanged, restartRequired };
  }

  reloadFailed(error: unknown): void {
    this.options.metrics.configReloads.inc({ result: 'failed' });
    const errors = error instanceof ConfigError ? errorLines(error) : [String(error)];
    this.options.log.error({ errors }, 'config reload refused: nothing changed');
  }

  /** The catalog of these API rollups beside the current file, swapped in (throws ConfigError when bad). */
  swap(api: readonly ApiRollup[]): CatalogChange {
    const next = buildCatalog(
      this.file,
      [...api].sort((a, b) => (a.id < b.id ? -1 : 1)),
      this.catalog,
    );
    this.api = new Map(api.map((a) => [a.id, a]));
    return this.replace(next);
  }

  private replace(next: Catalog, file?: { config: Config; origin: string }): CatalogChange {
    const previous = this.catalog;
    const change = catalogChange(previous, next);
    this.catalog = next;
    if (file) this.file = file;
    if (change.added.length + change.changed.length + change.removed.length > 0)
      for (const listener of this.listeners) listener(next, previous);
    return change;
  }
}

/** The problems of a ConfigError, one per line, without its heading. */
export function errorLines(error: ConfigError): string[] {
  const lines = error.message.split('\n');
  return (lines.length > 1 ? lines.slice(1) : lines).map((l) => l.trim());
}

/** The `rollups:` entries of a config (raw, or parsed) by id. */
function writtenRollups(raw: unknown): Map<string, unknown> {
  const list = Array.isArray(raw)
    ? raw
    : typeof raw === 'object' && raw !== null
      ? (raw as { rollups?: unknown }).rollups
      : [];
  return new Map(
    (Array.isArray(list) ? list : []).flatMap((r: unknown) =>
      typeof r === 'object' && r !== null && typeof (r as { id?: unknown }).id === 'string'
        ? [[(r as { id: string }).id, r] as const]
        : [],
    ),
  );
}

/** A file's entry with its targets' literal secrets as placeholders: never answered. */
function redacted(definition: unknown): unknown {
  if (typeof definition !== 'object' || definition === null) return definition;
  const d = definition as { target?: unknown; repair?: { target?: unknown } };
  const hide = (target: unknown) =>
    typeof target === 'object' && target !== null && typeof (target as { type?: unknown }).type === 'string'
      ? redactTarget(target as never)
      : target;
  return {
    ...d,
    ...(d.target === undefined ? {} : { target: hide(d.target) }),
    ...(d.repair?.target === undefined ? {} : { repair: { ...d.repair, target: hide(d.repair.target) } }),
  };
}
