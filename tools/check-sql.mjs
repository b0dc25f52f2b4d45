#!/usr/bin/env node
/**
 * Refuses SQL outside src/store/ (run by `npm run lint`): every statement lives in the store, and
 * everything else calls its functions (docs/architecture.md). A statement, as postgres.js is used
 * here, is a tagged template whose text starts with an SQL command (sql`select ...`,
 * tx<Row[]>`update ...`), or a call of a client's statement helpers: unsafe(), file(), listen(),
 * notify() on something named like a client (sql, tx, db, adminSql()). Comments are skipped;
 * strings and templates are read as such. A textual check: it sees what a reader sees.
 *
 * Usage: node tools/check-sql.mjs [root]   (exit 1 and one line per statement found)
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';

const root = process.argv[2] ?? join(import.meta.dirname, '..');
const ALLOWED = join('src', 'store') + sep;

const COMMANDS = [
  'select',
  'insert',
  'update',
  'delete',
  'merge',
  'with',
  'create',
  'alter',
  'drop',
  'truncate',
  'lock',
  'set',
  'reset',
  'show',
  'listen',
  'unlisten',
  'notify',
  'begin',
  'commit',
  'rollback',
  'savepoint',
  'release',
  'vacuum',
  'analyze',
  'reindex',
  'cluster',
  'copy',
  'grant',
  'revoke',
  'comment',
  'do',
  'call',
  'explain',
  'prepare',
  'execute',
  'deallocate',
  'discard',
  'refresh',
];
const STATEMENT = new RegExp(`^\\s*(${COMMANDS.join('|')})\\b`, 'i');
/** The character before a tagged template's backtick: an identifier, a call, an index or type arguments. */
const TAG_END = /[\w$)\]>]/;
const HELPER = /\b[\w$]*(?:sql|tx|db)[\w$]*\s*(?:\(\s*\))?\s*\.\s*(unsafe|file|listen|notify)\s*\(/gi;

function* sourceFiles(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* sourceFiles(path);
    else if (/\.(ts|mts|cts|js|mjs)$/.test(entry.name) && !entry.name.endsWith('.d.ts')) yield path;
  }
}

/**
 * The source with comments blanked (offsets and line breaks kept), and the start and text of
 * every template literal that follows a tag.
 */
function scan(source) {
  const code = source.split('');
  const tagged = [];
  let i = 0;
  const blank = (from, to) => {
    for (let k = from; k < to; k++) if (code[k] !== '\n') code[k] = ' ';
  };
  const skipString = (quote) => {
    for (i++; i < source.length && source[i] !== quote; i++) if (source[i] === '\\') i++;
    i++;
  };
  // A template from its backtick: its text (expressions left out), and where it ends.
  const readTemplate = () => {
    let text = '';
    for (i++; i < source.length && source[i] !== '`'; i++) {
      if (source[i] === '\\') {
        text += source[i + 1] ?? '';
        i++;
      } else if (source.startsWith('${', i)) {
        text += ' ';
        i += 2;
        code_(1);
        i--;
      } else text += source[i];
    }
    i++;
    return text;
  };
  // Code until the matching close brace (inside a template's `${ }`), depth `depth`.
  const code_ = (depth) => {
    while (i < source.length && depth > 0) {
      const c = source[i];
      if (source.startsWith('//', i)) {
        const end = source.indexOf('\n', i);
        const to = end < 0 ? source.length : end;
        blank(i, to);
        i = to;
      } else if (source.startsWith('/*', i)) {
        const end = source.indexOf('*/', i + 2);
        const to = end < 0 ? source.length : end + 2;
        blank(i, to);
        i = to;
      } else if (c === "'" || c === '"') skipString(c);
      else if (c === '`') {
        let k = i - 1;
        while (k >= 0 && /\s/.test(source[k])) k--;
        const start = i;
        const text = readTemplate();
        if (k >= 0 && TAG_END.test(source[k])) tagged.push({ at: start, text });
      } else {
        if (c === '{') depth++;
        else if (c === '}') depth--;
        i++;
      }
    }
  };
  code_(Number.POSITIVE_INFINITY);
  return { code: code.join(''), tagged };
}

const lineOf = (source, at) => source.slice(0, at).split('\n').length;

const found = [];
for (const file of sourceFiles(join(root, 'src'))) {
  const path = relative(root, file);
  if (path.startsWith(ALLOWED)) continue;
  const source = readFileSync(file, 'utf8');
  const { code, tagged } = scan(source);
  for (const t of tagged)
    if (STATEMENT.test(t.text))
      found.push(`${path}:${lineOf(source, t.at)}: ${t.text.trim().split('\n')[0].slice(0, 80)}`);
  for (const m of code.matchAll(HELPER))
    found.push(`${path}:${lineOf(source, m.index)}: ${m[0].replace(/\s+/g, '')}`);
}

if (found.length > 0) {
  console.error(
    `SQL outside src/store/ (every statement belongs in the store; call a function of it instead):\n${found
      .map((f) => `  ${f}`)
      .join('\n')}`,
  );
  process.exit(1);
}
