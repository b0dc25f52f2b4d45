/**
 * bench:cli: how long a user waits for the command line and for a start, hyperfine-style.
 *
 * The built CLI (`node dist/src/cli/main.js`) is run BENCH_RUNS times per command (after
 * BENCH_WARMUP untimed runs), each timed from spawn to exit, commands interleaved round by round so
 * load from elsewhere hits all alike: `node -e 0` (the floor: Node's own start), `--version`,
 * `--help`, and against a running embedded daemon found through its record (no flag, as a user in
 * its directory runs them) `check`, `emit` and `status`. Beside them, the coverage request alone
 * (GET /v1/assets/{asset}/coverage from this process, keep-alive off, as a command makes it), so
 * `check` can be read as start-up plus request. Then `npm start` in a fresh clone's state: with an
 * empty data directory (initdb, the first start after `npm ci`) and again (later starts), each
 * timed from spawn to the ready line; the build is already done by `npm ci` (prepare).
 * Prints one JSON document: p50/p95/min/max in ms per command and the CPU it used (user + system
 * of the child, read from this process's reaped-children times: a figure load elsewhere moves far
 * less than the wall time), the starts, the goals, load average.
 *
 *   npm run bench:cli
 *   BENCH_RUNS=50 BENCH_STARTS=3 npm run bench:cli
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { CONFIG_ENV_VARS } from '../src/config/index.js';
import type { DaemonRecord } from '../src/support/daemon-record.js';
import { packageRoot } from '../src/support/paths.js';
import { median, round } from './common.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 20);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 2);
const STARTS = Number(process.env.BENCH_STARTS ?? 2);
const ROOT = packageRoot();
const CLI = join(ROOT, 'dist', 'src', 'cli', 'main.js');
const WINDOW = ['--start', '2025-06-01T00:00:00Z', '--end', '2025-06-01T01:00:00Z'];

/** The environment of a user with nothing set: no config, no URLs; the data directory given. */
function cleanEnv(dataDir: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, COVERAGE_ROLLUP_DATA_DIR: dataDir };
  for (const key of [...CONFIG_ENV_VARS, 'COVERAGE_ROLLUP_TOKEN'])
    if (key !== 'COVERAGE_ROLLUP_DATA_DIR') delete env[key];
  return env;
}

/**
 * CPU of this process's reaped children (user + system, /proc/self/stat's cutime and cstime, in
 * clock ticks of 10 ms), in ms: the CPU a command used, whatever else runs on the machine.
 */
function childCpuMs(): number {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[13]) + Number(fields[14])) * 10;
}

/** CPU ms of each command run, beside its wall time, under the name of the command being run. */
const cpu: Record<string, number[]> = {};
let current = 'setup';

/** Spawn to exit, in ms; a command that fails fails the benchmark (exit 1 is `check`'s "not covered"). */
async function timed(
  args: readonly string[],
  env: NodeJS.ProcessEnv,
  ok: readonly number[] = [0],
): Promise<number> {
  const cpuBefore = childCpuMs();
  const started = process.hrtime.bigint();
  const child = spawn(process.execPath, args, { env, cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const [code] = (await once(child, 'exit')) as [number | null];
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  if (!ok.includes(code ?? -1)) throw new Error(`${args.join(' ')} exited ${code}: ${stderr}`);
  cpu[current] = [...(cpu[current] ?? []), childCpuMs() - cpuBefore];
  return ms;
}

function stats(samples: readonly number[]) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
  return {
    p50_ms: round(at(0.5), 1),
    p95_ms: round(at(0.95), 1),
    min_ms: round(sorted[0]!, 1),
    max_ms: round(sorted.at(-1)!, 1),
    runs: sorted.length,
  };
}

/** `npm start` with an empty environment until its ready line; resolves with the ms and the child. */
async function npmStart(dataDir: string): Promise<{ ms: number; child: ChildProcess }> {
  const env = { ...cleanEnv(dataDir), PORT: '0' };
  const started = process.hrtime.bigint();
  const child = spawn('npm', ['start'], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const tail: string[] = [];
  const exited = once(child, 'exit');
  const ms = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      tail.push(line);
      if (tail.length > 30) tail.shift();
      if (line.includes('"msg":"ready')) resolve(Number(process.hrtime.bigint() - started) / 1e6);
    });
    child.stderr!.on('data', (chunk: Buffer) => tail.push(chunk.toString()));
    void exited.then(([code]) =>
      reject(new Error(`npm start exited (${code}) before ready:\n${tail.join('\n')}`)),
    );
  });
  return { ms, child };
}

async function stop(child: ChildProcess): Promise<void> {
  const exited = once(child, 'exit');
  process.kill(-child.pid!, 'SIGTERM'); // npm and the daemon: the group, as a terminal's Ctrl-C
  await exited;
}

/** GET the coverage answer as `check` does: one fresh connection, the local token. */
function coverageRequest(record: DaemonRecord, asset: string): Promise<number> {
  const started = process.hrtime.bigint();
  const url = `${record.url}/v1/assets/${encodeURIComponent(asset)}/coverage?start=2025-06-01T00:00:00Z&end=2025-06-01T01:00:00Z&limit=20`;
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { headers: { authorization: `Bearer ${record.token}` }, agent: false },
      (res) => {
        res.resume();
        res.on('end', () => resolve(Number(process.hrtime.bigint() - started) / 1e6));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

async function main(): Promise<void> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: npm run build`);
  const home = mkdtempSync(join(tmpdir(), 'crbench-cli-'));
  chmodSync(home, 0o755); // run as root, the embedded server runs as another user that must reach it
  const loadBefore = loadavg();
  const starts: { first_ms: number[]; later_ms: number[] } = { first_ms: [], later_ms: [] };
  try {
    // Starts: a fresh data directory each round (initdb), then a later start on it.
    for (let i = 0; i < STARTS; i++) {
      const dataDir = join(home, `starts-${i}`);
      const first = await npmStart(dataDir);
      starts.first_ms.push(round(first.ms, 0));
      await stop(first.child);
      const later = await npmStart(dataDir);
      starts.later_ms.push(round(later.ms, 0));
      await stop(later.child);
    }

    // The daemon the commands find through its record.
    const dataDir = join(home, 'daemon');
    const daemon = await npmStart(dataDir);
    try {
      const record = JSON.parse(readFileSync(join(dataDir, 'daemon.json'), 'utf8')) as DaemonRecord;
      const env = cleanEnv(dataDir);
      await timed([CLI, 'emit', '--asset', 'bench.cli', '--interval', '2025-06-01T00:00:00Z/PT1H'], env);
      let emitted = 0;
      const commands: Record<string, () => Promise<number>> = {
        node_floor: () => timed(['-e', '0'], env),
        version: () => timed([CLI, '--version'], env),
        help: () => timed([CLI, '--help'], env),
        check: () => timed([CLI, 'check', 'bench.cli', ...WINDOW], env),
        emit: () => {
          emitted += 1;
          const start = Date.UTC(2025, 0, 1) + emitted * 60_000;
          const interval = `${new Date(start).toISOString()}/PT1M`;
          return timed([CLI, 'emit', '--asset', 'bench.emit', '--interval', interval], env);
        },
        status: () => timed([CLI, 'status'], env),
        coverage_request: () => coverageRequest(record, 'bench.cli'),
      };
      const samples: Record<string, number[]> = Object.fromEntries(Object.keys(commands).map((k) => [k, []]));
      for (let i = 0; i < WARMUP + RUNS; i++) {
        for (const [name, run] of Object.entries(commands)) {
          current = i >= WARMUP ? name : 'warmup';
          const ms = await run();
          if (i >= WARMUP) samples[name]!.push(ms);
        }
      }
      const result = Object.fromEntries(
        Object.entries(samples).map(([k, v]) => [
          k,
          { ...stats(v), ...(cpu[k] ? { cpu_p50_ms: median(cpu[k]!) } : {}) },
        ]),
      );
      const p50 = (k: string) => result[k]!.p50_ms;
      const request = p50('coverage_request');
      console.log(
        JSON.stringify(
          {
            benchmark: 'cli',
            runs: RUNS,
            warmup: WARMUP,
            node: process.version,
            commands: result,
            starts: {
              ...starts,
              first_p50_ms: median(starts.first_ms),
              later_p50_ms: median(starts.later_ms),
            },
            goals: {
              version_under_150_ms: p50('version') < 150,
              help_under_150_ms: p50('help') < 150,
              check_under_300_ms_plus_request: p50('check') < 300 + request,
              emit_under_300_ms_plus_request: p50('emit') < 300 + request,
            },
            load_average: { before: loadBefore.map((x) => round(x)), after: loadavg().map((x) => round(x)) },
          },
          null,
          2,
        ),
      );
    } finally {
      await stop(daemon.child);
    }
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

await main();
