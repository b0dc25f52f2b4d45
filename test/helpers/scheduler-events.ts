/**
 * Waiting on a scheduler's events (`pass`, `decided`) with a deadline, instead of polling tables
 * or sending barrier data. Attach (call) before acting, await after.
 */
import type { Scheduler } from '../../src/scheduler/scheduler.js';
import type { SchedulerEvents } from '../../src/scheduler/scheduler-events.js';
import { LOADED_DEADLINE_MS } from './wait.js';

/** The first `name` event matching `match`; rejects naming `what` if none comes within `timeout` ms. */
export function nextEvent<K extends keyof SchedulerEvents>(
  scheduler: Scheduler,
  name: K,
  match: (event: SchedulerEvents[K][0]) => boolean,
  { timeout = LOADED_DEADLINE_MS, what = String(name) }: { timeout?: number; what?: string } = {},
): Promise<SchedulerEvents[K][0]> {
  return new Promise((resolve, reject) => {
    const listener = (event: SchedulerEvents[K][0]) => {
      if (!match(event)) return;
      done();
      resolve(event);
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`timed out after ${timeout} ms waiting for ${what}`));
    }, timeout);
    const on = scheduler.on.bind(scheduler) as (n: K, l: typeof listener) => void;
    const off = scheduler.off.bind(scheduler) as (n: K, l: typeof listener) => void;
    function done() {
      clearTimeout(timer);
      off(name, listener);
    }
    on(name, listener);
  });
}
