import type { Logger } from './log.js';

/** How often a start step still running says so. */
export const SLOW_STEP_EVERY_MS = 10_000;

/**
 * Awaits one step of the start (creating the embedded cluster, starting its server, the
 * migrations, opening the HTTP port) and, every `everyMs` while it runs, logs that it still runs
 * and for how long: on a loaded machine a step can take many seconds, and a start that prints
 * nothing meanwhile cannot be told from a hung one.
 */
export async function whileSlow<T>(
  log: Logger,
  step: string,
  work: Promise<T>,
  everyMs = SLOW_STEP_EVERY_MS,
): Promise<T> {
  const started = Date.now();
  const timer = setInterval(() => {
    const seconds = Math.round((Date.now() - started) / 1000);
    log.info({ step, seconds }, `still ${step} (${seconds} s so far)`);
  }, everyMs);
  try {
    return await work;
  } finally {
    clearInterval(timer);
  }
}
