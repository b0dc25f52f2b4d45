import { PERIOD_STATES } from '../../core/policy.js';

/** A pixel holding several periods shows the most severe state (PERIOD_STATES is least first). */
export const periodSeverity = (state: string) => PERIOD_STATES.indexOf(state as never);
