-- Run counts are read through periods_run_state instead of kept by a statement trigger. The
-- trigger made every run transition upsert two shared rows per rollup (the old and the new state),
-- so concurrent deliveries of one rollup queued on those rows, and could deadlock on them in either
-- order; at 2,880 deliveries a test's decisions came five times later. The states worth counting
-- (open, failed, timed out, lost) are few rows per rollup and an index-only range; succeeded, the
-- bulk of history, is not counted (see docs/decisions.md "Runs").
DROP TRIGGER periods_run_count_insert ON periods;
DROP TRIGGER periods_run_count_update ON periods;
DROP TRIGGER periods_run_count_delete ON periods;
DROP FUNCTION period_run_counts_apply();
DROP TABLE period_run_counts;
