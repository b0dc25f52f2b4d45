/**
 * The daemon's own table maintenance: it says at start and in /readyz when autovacuum
 * does not look after its database, and then analyzes its tables after large changes and vacuums
 * them after many dead rows, under the maintenance lock.
 */
import { Writable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { normalizeEvent } from '../../src/core/events.js';
import { startDaemon } from '../../src/daemon/daemon.js';
import { commitEvents } from '../../src/store/assets/commit.js';
import { autovacuumState, tablesNeedingWork } from '../../src/store/upkeep/maintenance.js';
import { createLogger } from '../../src/support/log.js';
import { testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';

const db = await createTestDatabase();
const prefix = createTestPrefix();
// Where the server runs autovacuum, the test turns it off for the tables it changes, which the
// daemon must notice just the same.
const [{ on }] = await db.sql<[{ on: boolean }]>`select current_setting('autovacuum')::bool as on`;
if (on) {
  await db.sql`alter table segments set (autovacuum_enabled = false)`;
  await db.sql`alter table assets set (autovacuum_enabled = false)`;
}

const lines: Array<Record<string, unknown>> = [];
const sink = new Writable({
  write(chunk, _encoding, done) {
    for (const line of String(chunk).split('\n')) if (line) lines.push(JSON.parse(line));
    done();
  },
});
const config = testConfig(db, prefix, { retention: { prune_every: 'PT1S' } });
const daemon = await startDaemon(config, createLogger('info', sink));
afterAll(() => daemon.stop());

const iso = (ms: number) => new Date(ms).toISOString();
const T0 = Date.UTC(2026, 0, 1);

const statsOf = async (table: string) =>
  (
    await db.sql<{ analyzed: Date | null; vacuumed: Date | null }[]>`
      select last_analyze as analyzed, last_vacuum as vacuumed from pg_stat_user_tables where relname = ${table}`
  )[0]!;

describe('table maintenance where autovacuum does not run', () => {
  it('says so at start and in /readyz', async () => {
    const state = await autovacuumState(db.sql);
    expect(!state.database || state.tablesOff.includes('segments')).toBe(true);
    const warning = lines.find((l) => /autovacuum is off/.test(String(l.msg)));
    expect(warning, JSON.stringify(lines.map((l) => l.msg))).toBeDefined();
    const ready = (await daemon.http.inject({ url: '/readyz' })).json();
    expect(ready.maintenance).toMatchObject({
      autovacuum: on ? 'on' : 'off',
      daemon_maintains: true,
    });
    if (on) expect(ready.maintenance.tables_without_autovacuum).toEqual(['assets', 'segments']);
  });

  it('analyzes its tables after a large change', async () => {
    expect((await statsOf('segments')).analyzed).toBeNull();
    const events = Array.from({ length: 3000 }, (_, i) =>
      normalizeEvent(
        {
          asset: 'maint.a',
          start: iso(T0 + 2 * i * 60_000),
          end: iso(T0 + (2 * i + 1) * 60_000),
          id: `m${i}`,
        },
        { maxPayloadBytes: 65_536 },
      ),
    );
    await commitEvents(db.sql, events);
    await waitFor(async () => (await statsOf('segments')).analyzed !== null, {
      what: 'segments analyzed by the daemon',
      timeout: 30_000,
    });
    const [{ reltuples }] = await db.sql<[{ reltuples: number }]>`
      select reltuples::float8 as reltuples from pg_class where relname = 'segments'`;
    expect(reltuples).toBeGreaterThanOrEqual(3000);
    const ready = (await daemon.http.inject({ url: '/readyz' })).json();
    expect(ready.maintenance.tables_analyzed).toBeGreaterThan(0);
    expect(ready.maintenance.last_pass_at).not.toBeNull();
  });

  it('vacuums a table after many dead rows, and then has nothing left to do', async () => {
    // 500 dead rows: assets added and deleted. (Updates of one row would be HOT updates, and page
    // pruning takes their dead versions off the count again: 500 of them leave about 20 counted.)
    await db.sql`
      insert into assets (name, domain) select 'maint.gone.' || i, 'time' from generate_series(1, 500) i`;
    await db.sql`delete from assets where name like 'maint.gone.%'`;
    await waitFor(async () => (await statsOf('assets')).vacuumed !== null, {
      what: 'assets vacuumed by the daemon',
      timeout: 30_000,
    }).catch(async (error: Error) => {
      // What the daemon saw and said, for a failure seen only under the full suite's load.
      const [row] = await db.sql`
        select n_dead_tup, n_live_tup, n_mod_since_analyze, last_vacuum, last_analyze
        from pg_stat_user_tables where relname = 'assets'`;
      const said = lines.filter((l) => /maintenance|vacuum|analy/i.test(String(l.msg)));
      const ready = (await daemon.http.inject({ url: '/readyz' })).json();
      throw new Error(
        `${error.message}; assets stats ${JSON.stringify(row)}; needing work ${JSON.stringify(
          await tablesNeedingWork(db.sql),
        )}; maintenance ${JSON.stringify(ready.maintenance)}; log ${JSON.stringify(said.slice(-10))}`,
      );
    });
    await waitFor(async () => !(await tablesNeedingWork(db.sql)).some((w) => w.table === 'assets'), {
      what: 'nothing left to do on assets',
    });
  });
});
