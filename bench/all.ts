/**
 * npm run bench: runs every benchmark in turn and writes their JSON, the machine and the commands
 * into the "Latest run" section of docs/benchmarks.md (between the bench markers); the rest of the
 * page, the analysis and the history, is left as written.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { connectOnce } from '../src/store/pg/db.js';
import { ADMIN_URL } from './common.js';

const BENCHES = ['ingest', 'query', 'trigger', 'holes'] as const;
const FILE = 'docs/benchmarks.md';
const BEGIN = '<!-- bench:begin -->';
const END = '<!-- bench:end -->';

const results: Array<{ name: string; json: string }> = [];
for (const name of BENCHES) {
  await checkpoint();
  console.error(`running bench:${name} ...`);
  // Through npm, so each runs with the node flags its script sets (package.json).
  const out = execFileSync('npm', ['run', '--silent', `bench:${name}`], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  // Each benchmark prints one JSON document (possibly pretty-printed) as its whole stdout.
  const json = JSON.stringify(JSON.parse(out), null, 1);
  process.stdout.write(`${json}\n`);
  results.push({ name, json });
}

const cpu = cpus()[0]?.model ?? 'unknown CPU';
const machine = `${cpus().length} × ${cpu}, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, load average ${loadavg()
  .map((l) => l.toFixed(2))
  .join(' ')} at the end`;
const section = [
  BEGIN,
  `## Latest run (\`npm run bench\`, ${new Date().toISOString().slice(0, 16)}Z)`,
  '',
  `Machine: ${machine}; PostgreSQL and Redis on the same host.`,
  '',
  ...results.flatMap(({ name, json }) => [`\`npm run bench:${name}\`:`, '', '```json', json, '```', '']),
  END,
].join('\n');

const page = readFileSync(FILE, 'utf8');
const start = page.indexOf(BEGIN);
const end = page.indexOf(END);
const next =
  start >= 0 && end > start
    ? page.slice(0, start) + section + page.slice(end + END.length)
    : `${page.trimEnd()}\n\n${section}\n`;
writeFileSync(FILE, next);
console.error(`wrote ${FILE}`);

/** Each benchmark starts after a checkpoint, so it does not pay for the previous one's writes. */
async function checkpoint(): Promise<void> {
  const admin = connectOnce(ADMIN_URL);
  try {
    await admin`checkpoint`;
  } catch (error) {
    console.error(`no checkpoint between benchmarks: ${(error as Error).message}`);
  } finally {
    await admin.end();
  }
}
