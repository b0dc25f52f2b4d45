/**
 * bench:ingest on an earlier commit against this working tree, interleaved in one run: A B A B …,
 * one round of bench/ingest.ts (its own no-op round, then ours) per turn, each side running its
 * own code in a process of its own. The earlier commit is exported with `git archive` into a temp
 * directory (sharing this checkout's node_modules) and removed afterwards. Prints JSON with each
 * side's rates and ratios per pair and their medians.
 *
 *   npm run bench:ingest-ab                          # base 001c322: the last commit before queue groups
 *   BENCH_BASE=<rev> BENCH_PAIRS=5 BENCH_N=50000 npm run bench:ingest-ab
 *
 * Other BENCH_* variables (BENCH_N, BENCH_ASSETS, BENCH_CONCURRENCY, …) reach both sides alike.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { packageRoot } from '../src/support/paths.js';
import { median, round } from './common.js';

const BASE = process.env.BENCH_BASE ?? '001c322';
const PAIRS = Number(process.env.BENCH_PAIRS ?? 3);
if (!Number.isInteger(PAIRS) || PAIRS < 1)
  throw new Error(`BENCH_PAIRS must be a positive integer, got ${PAIRS}`);

const root = packageRoot();
const git = (...args: string[]) => execFileSync('git', args, { cwd: root, encoding: 'utf8' }).trim();

/** The fields of one bench/ingest.ts result this comparison reads. */
interface IngestResult {
  noop_events_per_second: number;
  ingest_events_per_second: number;
  ratio_of_medians: number;
  per_round: Array<{ mean_commit_ms: number }>;
}

/** One round of bench/ingest.ts in `dir`, through tsx, its stderr passed on. */
function runIngest(dir: string): Promise<IngestResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/ingest.ts'], {
      cwd: dir,
      env: { ...process.env, BENCH_ROUNDS: '1' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`bench/ingest.ts in ${dir} exited ${code}`));
      else resolve(JSON.parse(out) as IngestResult);
    });
  });
}

function summary(runs: readonly IngestResult[]) {
  return {
    ingest_events_per_second: runs.map((r) => r.ingest_events_per_second),
    noop_events_per_second: runs.map((r) => r.noop_events_per_second),
    ratio: runs.map((r) => r.ratio_of_medians),
    mean_commit_ms: runs.map((r) => r.per_round[0]!.mean_commit_ms),
    median_ingest_events_per_second: median(runs.map((r) => r.ingest_events_per_second)),
    median_ratio: median(runs.map((r) => r.ratio_of_medians)),
  };
}

async function main(): Promise<void> {
  const baseRev = git('rev-parse', '--verify', `${BASE}^{commit}`);
  const dir = mkdtempSync(join(tmpdir(), 'crbench-base-'));
  try {
    execFileSync('tar', ['-x', '-C', dir], {
      input: execFileSync('git', ['archive', baseRev], { cwd: root, maxBuffer: 1 << 30 }),
    });
    symlinkSync(realpathSync(join(root, 'node_modules')), join(dir, 'node_modules'));
    const loadBefore = loadavg()[0]!;
    const before: IngestResult[] = [];
    const after: IngestResult[] = [];
    for (let p = 0; p < PAIRS; p++) {
      before.push(await runIngest(dir));
      after.push(await runIngest(root));
    }
    const b = summary(before);
    const a = summary(after);
    // Each pair's quotient: the two halves of a pair saw about the same machine load.
    const perPair = (f: (r: IngestResult) => number) => after.map((r, i) => round(f(r) / f(before[i]!), 3));
    const rateQuotients = perPair((r) => r.ingest_events_per_second);
    const result = {
      benchmark: 'ingest-ab',
      before: { commit: baseRev, subject: git('log', '-1', '--format=%s', baseRev), ...b },
      after: {
        commit: git('rev-parse', 'HEAD'),
        uncommitted_changes: git('status', '--porcelain', '--untracked-files=no') !== '',
        ...a,
      },
      after_over_before: {
        ingest_events_per_second: median(rateQuotients),
        ratio: median(perPair((r) => r.ratio_of_medians)),
        per_pair_ingest_events_per_second: rateQuotients,
      },
      pairs: PAIRS,
      events_per_round: Number(process.env.BENCH_N ?? 100_000),
      loadavg_1m: { before: round(loadBefore, 2), after: round(loadavg()[0]!, 2) },
    };
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
