/**
 * A background pass on a timer: one pass at a time, the next scheduled when the last one ends (so a
 * slow pass never overlaps itself), every timer unref'd (it never keeps the process alive), and
 * `stop()` waits for the pass in flight. The retention and maintenance loops and the failed-job
 * reconciliation each run one; the pass says how long until the next (a held lock asks for a
 * sooner retry), or returns nothing for the usual interval.
 */
export class Periodic {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> = Promise.resolve();
  private stopped = false;

  constructor(
    private readonly pass: () => Promise<unknown>,
    private readonly everyMs: number,
  ) {}

  /** Schedules the first pass `delayMs` from now. */
  start(delayMs = this.everyMs): void {
    this.schedule(delayMs);
  }

  /** One pass now, counted as in flight for stop(); the timer is left as it is. */
  runNow(): Promise<unknown> {
    const pass = this.pass();
    this.running = pass;
    return pass;
  }

  get isStopped(): boolean {
    return this.stopped;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running.catch(() => undefined);
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      const pass = this.runNow();
      void pass.then(
        (next) => this.schedule(typeof next === 'number' ? next : this.everyMs),
        () => this.schedule(this.everyMs),
      );
    }, delayMs);
    this.timer.unref();
  }
}
