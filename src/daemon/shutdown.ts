import type { Logger } from '../support/log.js';

/** The scheduler's share of the shutdown budget; ingest has the rest. */
const SCHEDULER_SHARE = 0.5;

/**
 * One shutdown budget, `shutdown_timeout` (T), split explicitly: stopping the scheduler (its pass
 * in flight; the lease is released after it or at its share's end) takes at most
 * SCHEDULER_SHARE × T, and ingest drains its in-flight commits within what is left of T, so the
 * two together never exceed T. Counted from `stop()` (or from the first share asked for).
 */
export function shutdownBudget(totalMs: number) {
  let deadline: number | undefined;
  const start = () => {
    deadline ??= performance.now() + totalMs;
  };
  const leftMs = () => {
    start();
    return Math.max(0, deadline! - performance.now());
  };
  return { start, leftMs, schedulerMs: () => Math.min(totalMs * SCHEDULER_SHARE, leftMs()) };
}

/** Resolves true when `work` settles within `ms`, false otherwise (work is left to finish alone). */
export function within(work: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    work.then(
      () => {
        clearTimeout(timer);
        resolve(true);
      },
      () => {
        clearTimeout(timer);
        resolve(true);
      },
    );
  });
}

/** Runs every closer in order; one that fails is logged and the rest still run. */
export async function closeAll(closers: Array<() => Promise<void>>, log: Logger): Promise<void> {
  for (const close of closers) {
    try {
      await close();
    } catch (error) {
      log.warn({ err: error }, 'error while shutting down');
    }
  }
}
