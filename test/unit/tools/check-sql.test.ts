/** tools/check-sql.mjs, run by `npm run lint`: SQL outside src/store/ fails it, naming where. */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

const TOOL = join(import.meta.dirname, '../../../tools/check-sql.mjs');
const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

/** Runs the check over a tree of these files (paths relative to the tree's root). */
function check(files: Record<string, string>) {
  const root = mkdtempSync(join(tmpdir(), 'check-sql-'));
  roots.push(root);
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  const run = spawnSync(process.execPath, [TOOL, root], { encoding: 'utf8' });
  return { status: run.status, stderr: run.stderr };
}

describe('the SQL check', () => {
  it('passes the repository as it is', () => {
    const run = spawnSync(process.execPath, [TOOL], { encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
  });

  it('refuses a statement planted outside src/store/, naming its file and line', () => {
    const planted = check({
      'src/scheduler/planted.ts':
        "import type { Sql } from '../store/pg/db.js';\n\nexport const n = (sql: Sql) =>\n  sql<{ n: number }[]>`\n    select count(*) as n from periods`;\n",
    });
    expect(planted.status).toBe(1);
    expect(planted.stderr).toContain('src/scheduler/planted.ts:4: select count(*) as n from periods');
  });

  it('refuses the client helpers that send statements: unsafe, listen, notify', () => {
    const helpers = check({
      'src/http/a.ts': "export const a = (sql: any) => sql.unsafe('delete from runs');\n",
      'src/ingest/b.ts': "export const b = (s: any) => s.sql\n  .listen('channel', () => {});\n",
      'src/cli/c.ts': "export const c = (tx: any) => tx.notify('channel', '');\n",
    });
    expect(helpers.status).toBe(1);
    expect(helpers.stderr).toContain('src/http/a.ts:1: sql.unsafe(');
    expect(helpers.stderr).toContain('src/ingest/b.ts:1: sql.listen(');
    expect(helpers.stderr).toContain('src/cli/c.ts:1: tx.notify(');
  });

  it('takes statements in src/store/, and SQL words in comments, strings and untagged text elsewhere', () => {
    const fine = check({
      'src/store/periods/x.ts': 'export const x = (sql: any) => sql`update periods set dirty = true`;\n',
      'src/scheduler/y.ts': [
        '// select * from periods: a comment',
        '/* update runs */',
        "export const y = 'select a plan';",
        // An untagged template: text, not a statement (its placeholder spelt apart for the linter).
        'export const z = `delete $' + '{1} later`;',
        'export const w = (server: any) => server.listen(8080);',
      ].join('\n'),
    });
    expect(fine.stderr).toBe('');
    expect(fine.status).toBe(0);
  });
});
