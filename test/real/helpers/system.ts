import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../../../src/support/paths.js';

/**
 * Real systems for test/real/: Python programs from the venvs `npm run test:real` installs
 * (tools/real/run.mjs), each started in a process group of its own, its output in
 * test-artifacts/real/<name>.log, and stopped by pid: SIGTERM to the group, SIGKILL after a grace
 * period, and `stop()` resolves only once no process of the group is left.
 */

const ROOT = packageRoot();
const VENVS = process.env.REAL_VENVS ?? join(ROOT, '.real');
export const REAL_ARTIFACTS = join(ROOT, 'test-artifacts', 'real');

/** A program of a system's venv (`venvBin('airflow', 'airflow')`); fails with what to run if absent. */
export function venvBin(system: string, program: string): string {
  const path = join(VENVS, system, 'venv', 'bin', program);
  if (!existsSync(path)) {
    throw new Error(`${path} is missing: run the real-system suites with \`npm run test:real\``);
  }
  return path;
}

export interface SystemOptions {
  readonly name: string;
  readonly command: string;
  readonly args: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
}

export class SystemProcess {
  readonly name: string;
  readonly pid: number;
  readonly logPath: string;
  readonly exited: Promise<void>;
  /** The exit code once exited (null while running or when ended by a signal). */
  exitCode: number | null = null;
  private readonly child: ChildProcess;
  private done = false;

  constructor(options: SystemOptions) {
    mkdirSync(REAL_ARTIFACTS, { recursive: true });
    this.name = options.name;
    this.logPath = join(REAL_ARTIFACTS, `${options.name}.log`);
    const log = createWriteStream(this.logPath, { flags: 'a' });
    this.child = spawn(options.command, [...options.args], {
      cwd: options.cwd,
      env: { ...process.env, ...options.env },
      detached: true, // its own process group: stop() reaches the workers it forks too
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    if (this.child.pid === undefined) throw new Error(`${options.name}: ${options.command} did not start`);
    this.pid = this.child.pid;
    liveGroups.add(this.pid);
    this.child.stdout?.pipe(log, { end: false });
    this.child.stderr?.pipe(log, { end: false });
    this.exited = new Promise((resolve) => {
      this.child.once('exit', (code) => {
        this.exitCode = code;
        this.done = true;
        resolve();
      });
    });
  }

  get running(): boolean {
    return !this.done;
  }

  /** SIGTERM to the group, SIGKILL after `graceMs`; resolves once the whole group is gone. */
  async stop(graceMs = 15_000): Promise<void> {
    signalGroup(this.pid, 'SIGTERM');
    const deadline = Date.now() + graceMs;
    while (groupAlive(this.pid) && Date.now() < deadline) await pause(200);
    if (groupAlive(this.pid)) signalGroup(this.pid, 'SIGKILL');
    while (groupAlive(this.pid)) await pause(100);
    liveGroups.delete(this.pid);
    await Promise.race([this.exited, pause(1_000)]);
  }
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

/**
 * Whether a process of the group is still alive. On Linux a zombie (exited, not yet reaped by
 * init after its parent was killed) does not count: it holds nothing, and kill(-pgid, 0) would
 * report it for as long as init takes to reap it.
 */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
  } catch {
    return false;
  }
  if (!existsSync('/proc/self/stat')) return true;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so read after the last ')'.
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(pgrp) === pgid && state !== 'Z') return true;
  }
  return false;
}

/** Every group started by this worker, killed should the worker exit with them still running. */
const liveGroups = new Set<number>();
process.once('exit', () => {
  for (const pgid of liveGroups) signalGroup(pgid, 'SIGKILL');
});

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Resolves once `url` answers with a status below 500; fails after `timeoutMs` naming the log. */
export async function waitForHttp(url: string, timeoutMs: number, system?: SystemProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < deadline) {
    if (system && !system.running)
      throw new Error(`${system.name} exited before ${url} answered: see ${system.logPath}`);
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
      await response.arrayBuffer();
      if (response.status < 500) return;
      last = `status ${response.status}`;
    } catch (error) {
      last = (error as Error).message;
    }
    await pause(500);
  }
  throw new Error(
    `${url} did not answer within ${timeoutMs} ms (${last})${system ? `: see ${system.logPath}` : ''}`,
  );
}
