/**
 * The daemon's catalog of rollups while it runs: the config file's (read again by `reload`) and the
 * API's (`api_rollups`, written by `put` and `remove`). Every change is checked as a whole catalog
 * first (a bad one changes nothing), then swapped in at once and told to the listeners (the
 * scheduler applies it at its next pass) and, through PostgreSQL's notification, to every other
 * instance, which reads the row (or its own file) again: standbys follow without a restart.
 * Changes in one process run one at a time. Here the database and the notifications; the catalog
 * held in memory, its checks and swaps, is catalog-state.ts.
 */

import { randomUUID } from 'node:crypto';
import {
  type ApiRollup,
  type Catalog,
  type CatalogAudit,
  CatalogRefusal,
  calendarChanged,
  type EditableCatalog,
  type PutResult,
  type ReloadResult,
} from '../config/catalog.js';
import { ConfigError } from '../config/index.js';
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
import { literalSecretFields } from '../targets/secrets.js';
import { CatalogState, type CatalogStateOptions, errorLines } from './catalog-state.js';

export interface LiveCatalogOptions extends CatalogStateOptions {
  readonly sql: Sql;
}

export class LiveCatalog implements EditableCatalog {
  private readonly state: CatalogState;
  /** Names this catalog's own notices (two daemons may share a process, and so an instance id). */
  private readonly id = randomUUID();
  /** Changes in this process, one at a time. */
  private queue: Promise<unknown> = Promise.resolve();
  private unlisten: (() => Promise<void>) | undefined;

  private constructor(private readonly options: LiveCatalogOptions) {
    this.state = new CatalogState(options);
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
      live.state.swap(stored);
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
    return this.state.current();
  }

  definition(id: string) {
    return this.state.definition(id);
  }

  onChange(listener: (next: Catalog, previous: Catalog) => void): void {
    this.state.onChange(listener);
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
        const result = this.state.reloadFile();
        await notifyCatalog(this.options.sql, { file: this.id });
        return result;
      } catch (error) {
        this.state.reloadFailed(error);
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
      if (this.state.current().entry(id)?.source === 'file')
        throw fileRefusal(id, 'overwritten', this.state.fileOrigin());
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
          const next = this.state.check([...stored.filter((a) => a.id !== id), candidate]);
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
          if (commit) this.state.swap(commit);
          return answer;
        });
    });
  }

  /** Deletes an API rollup: it never triggers or delivers again; its history stays. */
  remove(id: string, by: string, audit?: CatalogAudit): Promise<{ removed: ApiRollup }> {
    return this.serially(async () => {
      if (this.state.current().entry(id)?.source === 'file')
        throw fileRefusal(id, 'deleted', this.state.fileOrigin());
      const rows = await this.options.sql.begin(async (tx) => {
        await lockCatalog(tx);
        const stored = await listApiRollups(tx);
        const found = stored.find((a) => a.id === id);
        if (!found)
          throw new CatalogRefusal(404, 'unknown_rollup', `no rollup ${id} was written through the API`);
        const rest = stored.filter((a) => a.id !== id);
        this.state.check(rest);
        await deleteApiRollup(tx, id);
        await audit?.(tx, found.definition, null);
        await notifyCatalog(tx, { api: id });
        return { rest, found };
      });
      this.state.swap(rows.rest);
      this.options.log.info({ rollup: id, by }, 'rollup deleted through the API');
      return { removed: rows.found };
    });
  }

  private async describePut(id: string, next: Catalog): Promise<PutResult> {
    const before = this.state.current().get(id);
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

  /** Another instance's change: its API rollup read again, or this instance's own file. */
  private async follow(notice: CatalogNotice): Promise<void> {
    if ('file' in notice) {
      if (notice.file === this.id || this.options.file === undefined) return;
      try {
        this.state.reloadFile();
      } catch (error) {
        this.state.reloadFailed(error);
      }
      return;
    }
    const row = await readApiRollup(this.options.sql, notice.api);
    const known = this.state.apiRollup(notice.api);
    if (row && known && row.writtenAt.getTime() === known.writtenAt.getTime()) return; // ours, or seen
    if (!row && !known) return;
    const rows = this.state.apiRollups().filter((a) => a.id !== notice.api);
    this.state.swap(row ? [...rows, row] : rows);
  }

  private async refreshAll(): Promise<void> {
    this.state.swap(await listApiRollups(this.options.sql));
  }

  private followFailed(error: unknown): void {
    this.options.log.error(
      { errors: error instanceof ConfigError ? errorLines(error) : [String(error)] },
      "a change of the rollups made elsewhere does not fit this instance's catalog: kept the one it has",
    );
  }

  private serially<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(work, work);
    this.queue = run.catch(() => {});
    return run;
  }
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
