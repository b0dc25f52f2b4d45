import { PERIOD_STATES } from '../../../core/periods/policy.js';

/**
 * The strip's drawing state of a triggered period whose current run failed, timed out or was lost:
 * still `triggered` as a period, but drawn apart (red) and as the most severe, so a failed hour
 * stands out in a day of blue ones instead of looking done.
 */
export const RUN_FAILED = 'run_failed';

/** A pixel holding several periods shows the most severe state (PERIOD_STATES is least first). */
export const periodSeverity = (state: string) =>
  state === RUN_FAILED ? PERIOD_STATES.length : PERIOD_STATES.indexOf(state as never);
