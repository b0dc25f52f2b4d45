import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../../../src/support/paths.js';
import { REAL_ARTIFACTS, venvBin } from './system.js';

/** An examples/ file, as a user runs it. */
export function exampleFile(name: string): string {
  return join(packageRoot(), 'examples', name);
}

export interface ScriptResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly ms: number;
}

/**
 * Runs a Python program of a venv (`python examples/...`) to its end and returns its output; fails
 * with both streams (also kept in test-artifacts/real/<name>.log) when it exits non-zero or
 * outlives `timeoutMs` (then it is killed).
 */
export function runPython(
  system: string,
  name: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
  timeoutMs = 120_000,
): Promise<ScriptResult> {
  return runProgram(venvBin(system, 'python'), name, args, env, timeoutMs);
}

/** The same for any program (`node examples/...`, `sh examples/...`). */
export function runProgram(
  program: string,
  name: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
  timeoutMs = 120_000,
): Promise<ScriptResult> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    execFile(
      program,
      [...args],
      {
        cwd: packageRoot(),
        env: { ...process.env, ...env },
        timeout: timeoutMs,
        killSignal: 'SIGKILL',
        maxBuffer: 32 * 1024 * 1024,
      },
      (error, stdout, stderr) => {
        mkdirSync(REAL_ARTIFACTS, { recursive: true });
        writeFileSync(join(REAL_ARTIFACTS, `${name}.log`), `$ ${args.join(' ')}\n${stdout}\n${stderr}`);
        if (error) {
          reject(
            new Error(`${name}: ${error.message}\n--- stdout\n${stdout}\n--- stderr\n${stderr.slice(-4000)}`),
          );
          return;
        }
        resolve({ stdout, stderr, ms: Date.now() - started });
      },
    );
  });
}

/** The last line of `stdout` that is a JSON object. */
export function lastJson<T>(stdout: string): T {
  const line = stdout
    .trim()
    .split('\n')
    .reverse()
    .find((l) => l.startsWith('{'));
  if (!line) throw new Error(`no JSON line in:\n${stdout}`);
  return JSON.parse(line) as T;
}

/** `GET /v1/assets/{asset}/coverage` of a daemon. */
export interface CoverageAnswer {
  readonly covered: boolean;
  readonly ratio: number;
  readonly missing: readonly { start: string; end: string }[];
  readonly batches: number;
}

export async function coverage(
  base: string,
  asset: string,
  start: string,
  end: string,
): Promise<CoverageAnswer> {
  const url = `${base}/v1/assets/${encodeURIComponent(asset)}/coverage?start=${encodeURIComponent(start)}&end=${encodeURIComponent(end)}`;
  const response = await fetch(url);
  if (response.status !== 200) throw new Error(`${url}: HTTP ${response.status} ${await response.text()}`);
  return (await response.json()) as CoverageAnswer;
}

/** A line for the suite's report: what a producer indexed and what it led to, with timings. */
export function report(line: string): void {
  process.stdout.write(`[real] ${line}\n`);
}
