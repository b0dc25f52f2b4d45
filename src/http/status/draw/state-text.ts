/** How the status page names coverage drawing states and period states. */
export const STATE_TEXT: Record<string, string> = {
  complete: 'complete',
  gap: 'gap',
  outside: 'gap (outside the covered extent)',
  behind: 'behind now (after the covered extent)',
  replay_required: 'replay required',
  waiting: 'waiting',
  settling: 'settling',
  triggered: 'triggered',
  rerun_pending: 'rerun pending',
  missed: 'missed',
  run_failed: 'triggered, run failed',
};
