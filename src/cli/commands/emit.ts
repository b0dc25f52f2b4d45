import { buildCatalog } from '../../config/catalog.js';
import type { Config } from '../../config/index.js';
import { defineRollups, type RollupRuntime } from '../../config/rollups.js';
import type { Domain } from '../../core/types.js';
import { commitChecked, commitsDirectly } from '../../ingest/direct.js';
import { checkEvents, normalizeOptions, precheckEvents, type Refusal } from '../../ingest/precheck.js';
import { listApiRollups } from '../../store/api-rollups.js';
import { domainsOf } from '../../store/assets/assets.js';
import type { Sql } from '../../store/pg/db.js';
import { type EmitInput, eventsOf, refuseArgs } from './emit-input.js';
import { commandConfig, type GlobalOptions, withSql } from './shared.js';

interface EmitOptions extends GlobalOptions, EmitInput {}

const CHUNK = 1000;

/**
 * Validates every event first (as the worker will), then enqueues them all or none; where the
 * queue is in the index's own PostgreSQL (queue.backend: postgres, the embedded default), commits
 * them into the index instead, as POST /v1/events does there (src/ingest/direct.ts).
 */
export async function runEmit(args: string[], values: EmitOptions): Promise<number> {
  const badArgs = refuseArgs(args, values);
  if (badArgs !== undefined) return badArgs;
  const config = await commandConfig(values);
  const { events, where } = eventsOf(values);
  const refused = (refusals: readonly Refusal[], outcome: string, offset = 0) => {
    const errors = refusals.map(
      ({ index, error }) => `${where(offset + index)}${error.reason}: ${error.message}`,
    );
    process.stderr.write(`${outcome}; ${errors.length} invalid event(s):\n${errors.join('\n')}\n`);
    return 2;
  };
  if (commitsDirectly(config)) return commitEvents(config, events, refused);
  const refusals = await precheckEvents(
    events,
    normalizeOptions(config, () => fileRollups(config)),
    (names) => recordedDomains(config, names),
  );
  if (refusals.length > 0) return refused(refusals, 'nothing enqueued');
  // Only here: the embedded default commits above without loading BullMQ.
  const { queueConnection } = await import('../../queue/backend.js');
  const { EventQueues } = await import('../../queue/event-queues.js');
  const connection = queueConnection(config, { oneShot: true });
  const queue = new EventQueues(connection, config.queue);
  queue.on('error', () => {}); // reported below, through the failed addBulk
  let sent = 0;
  try {
    for (; sent < events.length; sent += CHUNK) {
      await queue.addBulk(events.slice(sent, sent + CHUNK));
    }
  } catch (error) {
    process.stderr.write(
      `coverage-rollup emit: could not enqueue on ${config.queue.backend === 'redis' ? 'Redis' : 'PostgreSQL'} (${(error as Error).message}); ${sent} of ${events.length} event(s) were enqueued before it failed\n`,
    );
    return 2;
  } finally {
    await queue.close();
    await connection.close();
  }
  const groups = config.queue.groups > 1 ? ` (${config.queue.groups} groups)` : '';
  process.stdout.write(`enqueued ${events.length} event(s) on ${config.queue.name}${groups}\n`);
  return 0;
}

/**
 * Checks every event against the index, then commits them in transactions of CHUNK: nothing is
 * committed unless every event passed. Only a commit that runs beside this one can refuse an
 * event after that (its asset's domain set meanwhile): then the chunks before it stay committed.
 */
async function commitEvents(
  config: Config,
  events: readonly unknown[],
  refused: (refusals: readonly Refusal[], outcome: string, offset?: number) => number,
): Promise<number> {
  let committed = 0;
  let duplicates = 0;
  let sent = 0;
  try {
    const code = await withSql(
      config,
      async (sql) => {
        const rollups = await rollupsOf(config, sql);
        const checked = await checkEvents(
          events,
          normalizeOptions(config, () => rollups),
          (names) => domainsOf(sql, names),
        );
        if (checked.refusals.length > 0) return refused(checked.refusals, 'nothing committed');
        for (; sent < events.length; sent += CHUNK) {
          const outcome = await commitChecked(sql, checked.events.slice(sent, sent + CHUNK));
          if (outcome.kind === 'refused') {
            return refused(outcome.refusals, `${sent} of ${events.length} event(s) committed before`, sent);
          }
          for (const r of outcome.results) {
            if (r.status === 'committed') committed++;
            else duplicates++;
          }
        }
        return 0;
      },
      { connectTimeout: 5 },
    );
    if (code !== 0) return code;
  } catch (error) {
    process.stderr.write(
      `coverage-rollup emit: could not commit to PostgreSQL (${(error as Error).message}); ${sent} of ${events.length} event(s) were committed before it failed\n`,
    );
    return 2;
  }
  const already = duplicates > 0 ? ` (${duplicates} already there: duplicates)` : '';
  process.stdout.write(`committed ${committed + duplicates} event(s) to the index${already}\n`);
  return 0;
}

/** The config file's rollups: the worker checks the API's too before it commits an enqueued event. */
function fileRollups(config: Config): RollupRuntime[] {
  return defineRollups(config);
}

/**
 * The rollups the daemon runs (the file's and the API's), whose bound on the periods one event
 * touches a commit without the worker must apply too; the file's alone when the API's cannot be
 * read or checked (a database the daemon has not migrated yet has none).
 */
async function rollupsOf(config: Config, sql: Sql): Promise<readonly RollupRuntime[]> {
  try {
    return buildCatalog({ config, origin: 'config' }, await listApiRollups(sql)).rollups;
  } catch {
    return fileRollups(config);
  }
}

/**
 * The index's recorded domains, so an event the worker would dead-letter as domain_mismatch is
 * refused here. Producers may have no route to PostgreSQL, or it may be down; the queue takes
 * events meanwhile, so emit warns and enqueues without this one check rather than failing.
 */
async function recordedDomains(
  config: Config,
  names: readonly string[],
): Promise<ReadonlyMap<string, Domain>> {
  try {
    return await withSql(config, (sql) => domainsOf(sql, names), { connectTimeout: 3 });
  } catch (error) {
    process.stderr.write(
      `coverage-rollup emit: could not read asset domains from PostgreSQL (${(error as Error).message}); ` +
        'enqueuing without checking them against the index\n',
    );
    return new Map();
  }
}
