/**
 * Sleeps that end early: at their time, or when woken. A wake with nobody asleep is remembered
 * (`latch`), so a loop that was busy when work arrived does not then sleep through it.
 */
export class Alarm {
  private readonly sleepers = new Set<() => void>();
  private pending = false;

  constructor(private readonly latch = false) {}

  sleep(ms: number): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.sleepers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.sleepers.add(wake);
    });
  }

  /** A wake-up came while nobody slept, and no sleep has taken it yet (latching alarms only). */
  get woken(): boolean {
    return this.pending;
  }

  wake(): void {
    if (this.latch && this.sleepers.size === 0) this.pending = true;
    for (const wake of this.sleepers) wake();
  }
}
