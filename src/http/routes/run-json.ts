/** A run as the API shows it on a period (its documented fields, plus its id and generation). */
import type { RunView } from '../../store/runs/history.js';

export function runJson(run: RunView) {
  return {
    attempt: run.attempt,
    state: run.state,
    error: run.error,
    started_at: run.started_at,
    finished_at: run.finished_at,
    next_retry_at: run.next_retry_at,
    run_id: run.run_id,
    generation: run.generation,
  };
}
