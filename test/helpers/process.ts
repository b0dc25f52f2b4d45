import { type ChildProcess, spawn } from 'node:child_process';
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  type WriteStream,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, afterEach } from 'vitest';
import { CONFIG_ENV_VARS } from '../../src/config/index.js';
import { packageRoot } from '../../src/support/paths.js';
import { withTestBackend } from './env.js';
import { LOADED_DEADLINE_MS } from './wait.js';

/**
 * Real daemon processes for tests: the BUILT daemon (`node dist/src/cli/main.js start`, built once
 * per run by global-setup.ts) with a config file of its own, its pino JSON log captured line by
 * line. Every process must be ended by the test that started it (stop() or a signal it exits on):
 * afterEach kills whatever is still running and fails, so a leak is never silent.
 */

const ROOT = packageRoot();
export const DAEMON_ENTRY = join(ROOT, 'dist', 'src', 'cli', 'main.js');
/** Each process's stdout and stderr, for reading after a failure. */
const ARTIFACTS = join(ROOT, 'test-artifacts', 'processes');

/** One pino line: level (30 info, 40 warn, 50 error, 60 fatal), time (ISO), pid, msg, and fields. */
export interface LogLine {
  readonly level: number;
  readonly time: string;
  readonly pid: number;
  readonly msg: string;
  readonly [field: string]: unknown;
}

export interface ExitInfo {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface WaitOptions {
  readonly timeout?: number;
  readonly what?: string;
  /** Only lines at or after this index of `lines` (e.g. `p.lines.length` taken before an action). */
  readonly from?: number;
}

export interface SpawnOptions {
  /** A label for messages and the artifact file, unique within the file (e.g. 'sigkill-a'). */
  readonly name: string;
  /** The config, written to a temp file (as JSON, which YAML reads). */
  readonly config: Record<string, unknown>;
  /** Resolve once the 'listening' line is logged (default), or at once. */
  readonly waitReady?: boolean;
  readonly readyTimeout?: number;
}

type Matcher = (line: LogLine) => boolean;

interface Waiter {
  readonly match: Matcher;
  readonly resolve: (line: LogLine) => void;
  readonly reject: (error: Error) => void;
}

export class DaemonProcess {
  readonly name: string;
  readonly pid: number;
  readonly configPath: string;
  /** Parsed JSON lines of stdout, in order. */
  readonly lines: LogLine[] = [];
  /** Every output line as written, stderr and non-JSON stdout included. */
  readonly output: string[] = [];
  /** Settles when the process has exited and its output is fully read. */
  readonly exited: Promise<ExitInfo>;
  /** Set once, after `exited` settles. */
  exit: ExitInfo | null = null;
  /** The HTTP address from the 'listening' line, once logged. */
  url: string | undefined;
  /** Between signal('SIGSTOP') and signal('SIGCONT'). */
  suspended = false;
  private readonly child: ChildProcess;
  private readonly waiters = new Set<Waiter>();
  private readonly artifact: WriteStream;

  constructor(name: string, configPath: string) {
    this.name = name;
    this.configPath = configPath;
    const env = { ...process.env };
    for (const key of CONFIG_ENV_VARS) delete env[key]; // the config file decides, never the caller's shell
    this.child = spawn(process.execPath, [DAEMON_ENTRY, 'start', '--config', configPath], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    if (this.child.pid === undefined) throw new Error(`${name}: could not spawn ${DAEMON_ENTRY}`);
    this.pid = this.child.pid;
    mkdirSync(ARTIFACTS, { recursive: true });
    this.artifact = createWriteStream(join(ARTIFACTS, `${name}.log`));
    this.artifact.write(
      `# ${new Date().toISOString()} spawned pid ${this.pid}: ${DAEMON_ENTRY} start --config ${configPath}\n`,
    );
    const closed = Promise.all(
      (['stdout', 'stderr'] as const).map((stream) => {
        const rl = createInterface({ input: this.child[stream]!, crlfDelay: Number.POSITIVE_INFINITY });
        rl.on('line', (text) => this.onLine(text, stream));
        return new Promise<void>((resolve) => rl.once('close', resolve));
      }),
    );
    const exitInfo = new Promise<ExitInfo>((resolve) =>
      this.child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    this.exited = Promise.all([exitInfo, closed]).then(([info]) => {
      this.exit = info;
      this.suspended = false;
      this.artifact.end(`# ${new Date().toISOString()} exited: ${JSON.stringify(info)}\n`);
      const error = new Error(`${this.name} exited (${describeExit(info)}) first\n${this.tail()}`);
      for (const waiter of this.waiters) waiter.reject(error);
      this.waiters.clear();
      return info;
    });
  }

  get running(): boolean {
    return this.exit === null;
  }

  /** Sends a signal; SIGSTOP and SIGCONT are tracked so cleanup can still end the process. */
  signal(signal: NodeJS.Signals): void {
    if (!this.running) throw new Error(`${this.name} has already exited (${describeExit(this.exit!)})`);
    this.child.kill(signal);
    if (signal === 'SIGSTOP') this.suspended = true;
    if (signal === 'SIGCONT') this.suspended = false;
  }

  /** Lines whose msg equals `msg` (or that match a predicate). */
  logs(match: string | Matcher): LogLine[] {
    const m = matcher(match);
    return this.lines.filter(m);
  }

  /** The first line (from `from`) that matches, waiting for it; fails on timeout or exit. */
  waitForLog(
    match: string | Matcher,
    { timeout = LOADED_DEADLINE_MS, what, from = 0 }: WaitOptions = {},
  ): Promise<LogLine> {
    const m = matcher(match);
    const seen = this.lines.slice(from).find(m);
    if (seen) return Promise.resolve(seen);
    const label = what ?? (typeof match === 'string' ? `"${match}"` : 'a matching log line');
    if (!this.running)
      return Promise.reject(new Error(`${this.name} exited (${describeExit(this.exit!)}) before ${label}`));
    return new Promise<LogLine>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(new Error(`${this.name}: timed out after ${timeout} ms waiting for ${label}\n${this.tail()}`));
      }, timeout);
      const waiter: Waiter = {
        match: m,
        resolve: (line) => {
          clearTimeout(timer);
          resolve(line);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      };
      this.waiters.add(waiter);
    });
  }

  /** Waits for the process to exit, failing after `timeout` (the process is left as it is). */
  async waitForExit(timeout = LOADED_DEADLINE_MS): Promise<ExitInfo> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`${this.name} did not exit within ${timeout} ms\n${this.tail()}`)),
        timeout,
      );
    });
    try {
      return await Promise.race([this.exited, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** SIGTERM (after SIGCONT when suspended) and wait for the exit; the exit is returned, not judged. */
  async stop(timeout = LOADED_DEADLINE_MS): Promise<ExitInfo> {
    if (this.running) {
      if (this.suspended) this.signal('SIGCONT');
      this.signal('SIGTERM');
    }
    return this.waitForExit(timeout);
  }

  /** SIGKILL (works on a stopped process too) and wait for the exit. */
  async kill(): Promise<ExitInfo> {
    if (this.running) this.child.kill('SIGKILL');
    return this.waitForExit(10_000);
  }

  /** The last output lines, for failure messages. */
  tail(n = 40): string {
    const lines = this.output.slice(-n).map((l) => `  | ${l.length > 600 ? `${l.slice(0, 600)}...` : l}`);
    return `--- last ${lines.length} lines of ${this.name} (pid ${this.pid}) ---\n${lines.join('\n')}`;
  }

  private onLine(text: string, stream: 'stdout' | 'stderr'): void {
    this.output.push(stream === 'stderr' ? `[stderr] ${text}` : text);
    this.artifact.write(`${stream === 'stderr' ? '[stderr] ' : ''}${text}\n`);
    if (stream !== 'stdout') return;
    let line: LogLine;
    try {
      line = JSON.parse(text) as LogLine;
    } catch {
      return;
    }
    if (line === null || typeof line !== 'object' || typeof line.msg !== 'string') return;
    this.lines.push(line);
    if (line.msg === 'listening' && typeof line.url === 'string') this.url = line.url;
    for (const waiter of this.waiters) {
      if (waiter.match(line)) {
        this.waiters.delete(waiter);
        waiter.resolve(line);
      }
    }
  }
}

export interface ProcessHarness {
  /** Starts the built daemon with `config`; by default resolves once it is listening. */
  spawn(options: SpawnOptions): Promise<DaemonProcess>;
  /** Every process this file started. */
  readonly all: readonly DaemonProcess[];
  /** Stops every running process (SIGTERM, SIGCONT first when suspended); returns their exits. */
  stopAll(timeout?: number): Promise<ExitInfo[]>;
}

/** All processes of this test worker, killed should the worker exit with them still running. */
const everyProcess = new Set<DaemonProcess>();
let exitHookInstalled = false;

/**
 * Call once at module level: registers afterEach (a test that leaves a process running fails,
 * after it is killed) and afterAll (the same for processes started outside tests, and removes the
 * config files).
 */
export function processHarness(): ProcessHarness {
  if (!existsSync(DAEMON_ENTRY))
    throw new Error(
      `${DAEMON_ENTRY} is missing: the global setup builds it (npx tsc -p tsconfig.build.json)`,
    );
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', () => {
      for (const p of everyProcess) {
        try {
          process.kill(p.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    });
  }
  const dir = mkdtempSync(join(tmpdir(), 'coverage-rollup-proc-'));
  const all: DaemonProcess[] = [];

  const reap = async (when: string) => {
    const left = all.filter((p) => p.running);
    if (left.length === 0) return;
    const names = left.map((p) => `${p.name} (pid ${p.pid}${p.suspended ? ', suspended' : ''})`);
    await Promise.all(left.map((p) => p.kill()));
    throw new Error(
      `${when}: left ${left.length} daemon process(es) running, now killed: ${names.join(', ')}`,
    );
  };
  afterEach(() => reap('test'));
  afterAll(async () => {
    try {
      await reap('file');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  return {
    all,
    async spawn({ name, config, waitReady = true, readyTimeout = LOADED_DEADLINE_MS }) {
      if (all.some((p) => p.name === name)) throw new Error(`process name ${name} used twice`);
      const configPath = join(dir, `${name}.yaml`);
      // A data directory of its own: its record (daemon.json) must not land in the repository,
      // where every process of the run would start from.
      const own = { data_dir: join(dir, `${name}-data`), ...config };
      writeFileSync(configPath, `${JSON.stringify(withTestBackend(own), null, 2)}\n`);
      const p = new DaemonProcess(name, configPath);
      all.push(p);
      everyProcess.add(p);
      void p.exited.then(() => everyProcess.delete(p));
      if (waitReady) await p.waitForLog('listening', { timeout: readyTimeout, what: 'the daemon to listen' });
      return p;
    },
    async stopAll(timeout = LOADED_DEADLINE_MS) {
      return Promise.all(all.filter((p) => p.running).map((p) => p.stop(timeout)));
    },
  };
}

function matcher(match: string | Matcher): Matcher {
  return typeof match === 'string' ? (line) => line.msg === match : match;
}

function describeExit(info: ExitInfo): string {
  return info.signal ? `signal ${info.signal}` : `code ${info.code}`;
}

/** Milliseconds since the epoch of a log line's `time`. */
export function logTime(line: LogLine): number {
  return Date.parse(line.time);
}
