/**
 * Polls `check` until it returns a truthy value or the deadline passes. Tests wait on conditions,
 * never on fixed sleeps: the poll interval only bounds how soon success is noticed.
 */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  {
    timeout = 20_000,
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
