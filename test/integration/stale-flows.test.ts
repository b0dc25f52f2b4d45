/**
 * Stale connections, short (the 60 s two-instance case is npm run test:stale-flows): one daemon,
 * whose existing PostgreSQL flows stop answering for a few seconds while new connections work. It
 * gives up the stranded connections (an idle one, like its LISTEN connection, after a ping) and
 * carries on on fresh ones: every event indexed and the hours they complete triggered by this
 * daemon before the flows heal, a read asked at the cut answered, nothing lost or decided twice.
 * How soon (within pg_stall_timeout + 2 s) is a measurement, made by the fault suite on a machine
 * it reports the load of; here the flows stay stale until all that is done or a deadline sized for
 * a loaded machine passes (the OS would take about 15 minutes to notice a stale flow).
 */
import { describe, expect, it } from 'vitest';
import { staleFlowScenario } from '../helpers/stale-flows.js';
import { LOADED_DEADLINE_MS } from '../helpers/wait.js';

const STALL_MS = 1000;
const scenario = await staleFlowScenario({
  windowMs: 4000,
  rate: 40,
  stallMs: STALL_MS,
  standby: false,
  settleMs: LOADED_DEADLINE_MS,
});

describe('stale PostgreSQL flows', () => {
  it('indexes, triggers and reads on fresh connections while the old ones are stranded', {
    timeout: LOADED_DEADLINE_MS + 60_000,
  }, async () => {
    const r = await scenario.run();
    expect(r.stranded).toBeGreaterThan(0);
    expect(r.hoursCompletedInCut).toBeGreaterThan(1);
    expect(r.hoursTriggeredInCut).toBe(r.hoursCompletedInCut);
    expect(r.read).toMatchObject({ status: 200, ratio: 1 });
    expect(r.after).toEqual({
      events: r.sent,
      distinct: r.sent,
      triggers: r.hoursComplete,
      hours: r.hoursComplete,
      repeated: 0,
    });
  });
});
