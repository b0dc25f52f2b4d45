import { describe, expect, it } from 'vitest';
import { Alarm } from '../../../src/support/alarm.js';

/** Whether a promise settled by the time queued callbacks have run. */
async function settled(p: Promise<void>): Promise<boolean> {
  let done = false;
  void p.then(() => {
    done = true;
  });
  await new Promise((r) => setImmediate(r));
  return done;
}

describe('Alarm', () => {
  it('ends every sleep at a wake, long before its time', async () => {
    const alarm = new Alarm();
    const a = alarm.sleep(60_000);
    const b = alarm.sleep(60_000);
    expect(await settled(a)).toBe(false);
    alarm.wake();
    expect(await settled(a)).toBe(true);
    expect(await settled(b)).toBe(true);
  });

  it('remembers a wake with nobody asleep only when latching', async () => {
    const latching = new Alarm(true);
    latching.wake();
    expect(await settled(latching.sleep(60_000))).toBe(true);
    // Used up: the next sleep waits.
    const next = latching.sleep(60_000);
    expect(await settled(next)).toBe(false);
    latching.wake();
    await next;

    const plain = new Alarm();
    plain.wake();
    const p = plain.sleep(60_000);
    expect(await settled(p)).toBe(false);
    plain.wake();
    await p;
  });
});
