/**
 * The deadline for what takes a moment on a quiet machine (a daemon or an embedded server
 * starting, a pass, a trigger): sized for a loaded one, the suite beside two CPU hogs on two cores.
 * Only a failure ever waits it out; a pass ends as soon as its condition holds.
 */
export const LOADED_DEADLINE_MS = 90_000;

/**
 * Polls `check` until it returns a truthy value or the deadline passes. Tests wait on conditions,
 * never on fixed sleeps: the poll interval only bounds how soon success is noticed.
 */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  {
    timeout = LOADED_DEADLINE_MS,
    interval = 25,
    what = 'condition',
  }: { timeout?: number; interval?: number; what?: string } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeout;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      const cause = lastError instanceof Error ? `: ${lastError.message}` : '';
      throw new Error(`timed out after ${timeout} ms waiting for ${what}${cause}`);
    }
    await new Promise((r) => setTimeout(r, interval));
  }
}
