/**
 * The daemon's catalog of rollups while it runs: the config file's (read again by `reload`) and the
 * API's (`api_rollups`, written by `put` and `remove`). Every change is checked as a whole catalog
 * first (a bad one changes nothing), then swapped in at once and told to the listeners (the
 * scheduler applies it at its next pass) and, through PostgreSQL's notification, to every other
 * instance, which reads the row (or its own file) again: standbys follow without a restart.
 * Changes in one process run one at a time.
 */

import { randomUUID } from 'node:crypto';
import {
  type ApiRollup,
  buildCatalog,
  type Catalog,
  type CatalogAudit,
  type CatalogChange,
  CatalogRefusal,
  calendarChanged,
  catalogChange,
  type EditableCatalog,
  type PutResult,
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
import {
  type CatalogNotice,
  deleteApiRollup,
  listApiRollups,
  listenForCatalog,
  lockCatalog,
  notifyCatalog,
  readApiRollup,
  untriggeredPeriods,
  writeApiRollup,
} from '../store/api-rollups.js';
import type { Sql } from '../store/pg/db.js';
import type { Logger } from '../support/log.js';
import { literalSecretFields, redactTarget } from '../targets/secrets.js';

export interface LiveCatalogOptions {
  readonly sql: Sql;
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

export class LiveCatalog implements EditableCatalog {
  private catalog: Catalog;
  private file: { config: Config; origin: string };
  private api = new Map<string, ApiRollup>();
  private readonly listeners: Array<(next: Catalog, previous: Catalog) => void> = [];
  /** Names this catalog's own notices (two daemons may share a process, and so an instance id). */
  private readonly id = randomUUID();
  /** Changes in this process, one at a time. */
  private queue: Promise<unknown> = Promise.resolve();
  private unlisten: (() => Promise<void>) | undefined;
  /** The file's rollups as written, by id (as parsed when the daemon has no file). */
  private written: ReadonlyMap<string, unknown>;
  /**
   * The file's settings as last read, before start resolved them (an embedded database's URL):
   * what a reload compares with to say which changed settings need a restart.
   */
  private baseline: Config;

  private constructor(private readonly options: LiveCatalogOptions) {
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

  /**
   * The file's rollups with the API's as stored. API rollups that do not fit beside this file (an id
   * it defines now, a chain it breaks) are left out of this instance's catalog and logged: the
   * daemon starts with its file's rollups rather than not at all, and the API can mend them.
   */
  static async open(options: LiveCatalogOptions): Promise<LiveCatalog> {
    const live = new LiveCatalog(options);
    const stored = await listApiRollups(options.sql);
    try {
      live.swap(stored);
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      options.log.error(
        { errors: errorLines(error) },
        'rollups written through the API do not fit beside the config file: started without them; fix or delete them through the API',
      );
    }
    return live;
  }

  current(): Catalog {
    return this.catalog;
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

  /** Follows the other instances' changes, on a connection of its own. */
  async listen(): Promise<void> {
    this.unlisten = await listenForCatalog(
      this.options.sql,
      (notice) => void this.serially(() => this.follow(notice)).catch((error) => this.followFailed(error)),
      // (Re)connected: a change may have been missed; read every API rollup again.
      () => void this.serially(() => this.refreshAll()).catch((error) => this.followFailed(error)),
    );
  }

  async close(): Promise<void> {
    await this.unlisten?.().catch(() => {});
    await this.queue.catch(() => {});
  }

  /** Reads the config file again; throws ConfigError (nothing changed) with every problem. */
  reload(): Promise<ReloadResult> {
    return this.serially(async () => {
      if (this.options.file === undefined)
        throw new CatalogRefusal(
          409,
          'no_config_file',
          'this daemon was started without a config file: there is nothing to reload',
        );
      try {
        const result = this.reloadFile();
        await notifyCatalog(this.options.sql, { file: this.id });
        return result;
      } catch (error) {
        this.reloadFailed(error);
        throw error;
      }
    });
  }

  /**
   * Writes an API rollup (`definition`: one rollup as the config spells it, as JSON), checked with
   * every other rollup; under `dryRun` only says what it would change. `by`: who writes it;
   * `audit` records the write (before and after) in its transaction.
   */
  put(
    id: string,
    definition: unknown,
    by: string,
    dryRun: boolean,
    audit?: CatalogAudit,
  ): Promise<PutResult> {
    return this.serially(async () => {
      if (this.catalog.entry(id)?.source === 'file') throw fileRefusal(id, 'overwritten', this.file.origin);
      const body = withId(id, definition);
      const literal = literalSecrets(body);
      if (literal.length > 0) {
        throw new CatalogRefusal(
          422,
          'invalid_rollup',
          'a rollup written through the API is stored in PostgreSQL, where no secret is kept: give each secret as {env: NAME}',
          literal.map((field) => `rollups[${id}].${field}: a literal secret; give it as {env: NAME}`),
        );
      }
      return this.options.sql
        .begin(async (tx) => {
          await lockCatalog(tx);
          const stored = await listApiRollups(tx);
          const candidate: ApiRollup = { id, definition: body, writtenBy: by, writtenAt: new Date() };
          const next = this.check([...stored.filter((a) => a.id !== id), candidate]);
          const result = await this.describePut(id, next);
          if (dryRun || result.change === 'unchanged') return result;
          const written = await writeApiRollup(tx, id, body, by);
          await audit?.(tx, stored.find((a) => a.id === id)?.definition ?? null, body);
          await notifyCatalog(tx, { api: id });
          // Swapped once committed: the listeners (the scheduler) never see a row that might roll back.
          const rows = [...stored.filter((a) => a.id !== id), written];
          return { ...result, written, commit: rows } as PutResult & { commit: ApiRollup[] };
        })
        .then((result) => {
          const { commit, ...answer } = result as PutResult & { commit?: ApiRollup[] };
          if (commit) this.swap(commit);
          return answer;
        });
    });
  }

  /** Deletes an API rollup: it never triggers or delivers again; its history stays. */
  remove(id: string, by: string, audit?: CatalogAudit): Promise<{ removed: ApiRollup }> {
    return this.serially(async () => {
      if (this.catalog.entry(id)?.source === 'file') throw fileRefusal(id, 'deleted', this.file.origin);
      const rows = await this.options.sql.begin(async (tx) => {
        await lockCatalog(tx);
        const stored = await listApiRollups(tx);
        const found = stored.find((a) => a.id === id);
        if (!found)
          throw new CatalogRefusal(404, 'unknown_rollup', `no rollup ${id} was written through the API`);
        const rest = stored.filter((a) => a.id !== id);
        this.check(rest);
        await deleteApiRollup(tx, id);
        await audit?.(tx, found.definition, null);
        await notifyCatalog(tx, { api: id });
        return { rest, found };
      });
      this.swap(rows.rest);
      this.options.log.info({ rollup: id, by }, 'rollup deleted through the API');
      return { removed: rows.found };
    });
  }

  /** The catalog these API rollups make beside the current file, or a refusal naming every problem. */
  private check(api: readonly ApiRollup[]): Catalog {
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

  private async describePut(id: string, next: Catalog): Promise<PutResult> {
    const before = this.catalog.get(id);
    const after = next.get(id)!;
    const type = after.config.target.type;
    if (before === undefined)
      return {
        change: 'added',
        periods: { action: 'created', untriggered: 0 },
        target: { type, changed: true },
      };
    const targetChanged = JSON.stringify(before.config.target) !== JSON.stringify(after.config.target);
    if (before === after)
      return {
        change: 'unchanged',
        periods: { action: 'none', untriggered: 0 },
        target: { type, changed: false },
      };
    const untriggered = await untriggeredPeriods(this.options.sql, id);
    const action = calendarChanged(before, after) ? 'rebuilt' : 'reevaluated';
    return { change: 'changed', periods: { action, untriggered }, target: { type, changed: targetChanged } };
  }

  /** Reads and checks the file with the stored API rollups; swaps it in when it is good. */
  private reloadFile(): ReloadResult {
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

  private reloadFailed(error: unknown): void {
    this.options.metrics.configReloads.inc({ result: 'failed' });
    const errors = error instanceof ConfigError ? errorLines(error) : [String(error)];
    this.options.log.error({ errors }, 'config reload refused: nothing changed');
  }

  /** Another instance's change: its API rollup read again, or this instance's own file. */
  private async follow(notice: CatalogNotice): Promise<void> {
    if ('file' in notice) {
      if (notice.file === this.id || this.options.file === undefined) return;
      try {
        this.reloadFile();
      } catch (error) {
        this.reloadFailed(error);
      }
      return;
    }
    const row = await readApiRollup(this.options.sql, notice.api);
    const known = this.api.get(notice.api);
    if (row && known && row.writtenAt.getTime() === known.writtenAt.getTime()) return; // ours, or seen
    if (!row && !known) return;
    const rows = [...this.api.values()].filter((a) => a.id !== notice.api);
    this.swap(row ? [...rows, row] : rows);
  }

  private async refreshAll(): Promise<void> {
    this.swap(await listApiRollups(this.options.sql));
  }

  private followFailed(error: unknown): void {
    this.options.log.error(
      { errors: error instanceof ConfigError ? errorLines(error) : [String(error)] },
      "a change of the rollups made elsewhere does not fit this instance's catalog: kept the one it has",
    );
  }

  /** The catalog of these API rollups beside the current file, swapped in (throws ConfigError when bad). */
  private swap(api: readonly ApiRollup[]): CatalogChange {
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

  private serially<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => {});
    return run;
  }
}

/** The problems of a ConfigError, one per line, without its heading. */
export function errorLines(error: ConfigError): string[] {
  const lines = error.message.split('\n');
  return (lines.length > 1 ? lines.slice(1) : lines).map((l) => l.trim());
}

function fileRefusal(id: string, what: string, origin: string): CatalogRefusal {
  return new CatalogRefusal(
    409,
    'rollup_in_config_file',
    `rollup ${id} is defined in the config file (${origin}): it is not ${what} through the API; change the file and reload`,
  );
}

/** The body with the path's id (a body may leave it out; one that names another id is refused by the route). */
function withId(id: string, definition: unknown): unknown {
  return typeof definition === 'object' && definition !== null && !Array.isArray(definition)
    ? { ...definition, id }
    : definition;
}

/** The target fields of a body holding a literal secret (a body the schema refuses has none worth naming). */
function literalSecrets(body: unknown): string[] {
  const read = (target: unknown, at: string) =>
    typeof target === 'object' && target !== null && typeof (target as { type?: unknown }).type === 'string'
      ? literalSecretFields(target as never).map((f) => `${at}.${f}`)
      : [];
  const b = body as { target?: unknown; repair?: { target?: unknown } } | null;
  return [...read(b?.target, 'target'), ...read(b?.repair?.target, 'repair.target')];
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
