-- Runs: a trigger is the start of a downstream run, followed to its outcome. One row per
-- attempt of a trigger (rollup, period, generation); attempt 1 keeps the trigger's idempotency key
-- as its run id, attempt N > 1 gets `<key>~aN`. The delivery outbox moves here: a pending run is
-- what gets delivered; `triggers` stays the decision record (see docs/decisions.md "Runs").
CREATE TABLE runs (
  rollup_id text NOT NULL,
  period_lo bigint NOT NULL,
  generation int NOT NULL,
  attempt int NOT NULL CHECK (attempt >= 1),
  -- What the target sees: jobId, Idempotency-Key, the base of the Airflow dag_run_id.
  run_id text NOT NULL UNIQUE CHECK (position(':' in run_id) = 0),
  state text NOT NULL DEFAULT 'pending'
    CHECK (state IN ('pending', 'started', 'running', 'succeeded', 'failed', 'timed_out', 'lost')),
  -- Why this attempt exists: the trigger itself, an automatic retry, or a manual one.
  cause text NOT NULL CHECK (cause IN ('trigger', 'retry', 'manual')),
  -- The last error: a delivery error while pending, the outcome's error once finished.
  error text,
  -- The version a successful run reported (callback), if any.
  version text,
  -- The lease that made it (null for a manual retry, which any instance may make).
  lease_token bigint,
  created_at timestamptz NOT NULL DEFAULT now(),
  -- Pending: when the next delivery try is due (now, or later after a transient failure).
  due_at timestamptz,
  deliveries int NOT NULL DEFAULT 0,
  -- The target accepted it (started), and when an outcome was recorded.
  started_at timestamptz,
  finished_at timestamptz,
  -- Started or running: no outcome by then is timed_out (started_at + run.timeout).
  timeout_at timestamptz,
  -- When the scheduler next asks the target (queue, airflow) about it: while open, and for an
  -- Airflow run for a while after it finished (a cleared dag run reopens).
  check_at timestamptz,
  -- Finished without success, retries left: when attempt + 1 is made.
  next_retry_at timestamptz,
  PRIMARY KEY (rollup_id, period_lo, generation, attempt),
  FOREIGN KEY (rollup_id, period_lo, generation) REFERENCES triggers (rollup_id, period_lo, generation)
    ON DELETE CASCADE
);
-- Every scheduler pass reads these four through partial indexes that hold only the open rows, so an
-- idle pass costs a handful of index pages whatever the history.
CREATE INDEX runs_pending ON runs (due_at) WHERE state = 'pending';
CREATE INDEX runs_check ON runs (check_at) WHERE check_at IS NOT NULL;
CREATE INDEX runs_timeout ON runs (timeout_at) WHERE state IN ('started', 'running');
CREATE INDEX runs_retry ON runs (next_retry_at) WHERE next_retry_at IS NOT NULL;

-- Every report about a run (target polls, callbacks, the scheduler's own transitions), whether it
-- changed anything or not: a report for an older attempt or generation is recorded here and changes
-- nothing else.
CREATE TABLE run_reports (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  rollup_id text NOT NULL,
  period_lo bigint NOT NULL,
  generation int NOT NULL,
  attempt int NOT NULL,
  source text NOT NULL CHECK (source IN ('scheduler', 'queue', 'airflow', 'callback', 'manual')),
  state text NOT NULL,
  error text,
  version text,
  -- applied: the run moved; unchanged: it already was so; stale: an older attempt or generation;
  -- refused: the run's state does not move that way (a terminal state, except a reopen).
  effect text NOT NULL CHECK (effect IN ('applied', 'unchanged', 'stale', 'refused')),
  at timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (rollup_id, period_lo, generation, attempt) REFERENCES runs ON DELETE CASCADE
);
CREATE INDEX run_reports_run ON run_reports (rollup_id, period_lo, generation, attempt, id);

-- The current run of a period (its generation's newest attempt), denormalised so that the
-- run_state= filter and the failed counts read an index, not a join over years of runs.
ALTER TABLE periods ADD COLUMN run_attempt int, ADD COLUMN run_state text
  CHECK (run_state IN ('pending', 'started', 'running', 'succeeded', 'failed', 'timed_out', 'lost'));
CREATE INDEX periods_run_state ON periods (rollup_id, run_state, lo) WHERE run_state IS NOT NULL;

-- Periods per rollup and current run state, kept like period_counts by a statement trigger.
CREATE TABLE period_run_counts (
  rollup_id text NOT NULL,
  run_state text NOT NULL,
  n bigint NOT NULL,
  PRIMARY KEY (rollup_id, run_state)
);

CREATE FUNCTION period_run_counts_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO period_run_counts AS c (rollup_id, run_state, n)
    SELECT rollup_id, run_state, count(*) FROM new_rows WHERE run_state IS NOT NULL GROUP BY 1, 2
    ON CONFLICT (rollup_id, run_state) DO UPDATE SET n = c.n + excluded.n;
  ELSIF TG_OP = 'DELETE' THEN
    UPDATE period_run_counts c SET n = c.n - d.n
    FROM (SELECT rollup_id, run_state, count(*) AS n FROM old_rows WHERE run_state IS NOT NULL GROUP BY 1, 2) d
    WHERE c.rollup_id = d.rollup_id AND c.run_state = d.run_state;
  ELSE
    INSERT INTO period_run_counts AS c (rollup_id, run_state, n)
    SELECT rollup_id, run_state, sum(n) FROM (
      SELECT rollup_id, run_state, count(*) AS n FROM new_rows WHERE run_state IS NOT NULL GROUP BY 1, 2
      UNION ALL
      SELECT rollup_id, run_state, -count(*) FROM old_rows WHERE run_state IS NOT NULL GROUP BY 1, 2
    ) d GROUP BY 1, 2 HAVING sum(n) <> 0
    ON CONFLICT (rollup_id, run_state) DO UPDATE SET n = c.n + excluded.n;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER periods_run_count_insert AFTER INSERT ON periods
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION period_run_counts_apply();
CREATE TRIGGER periods_run_count_update AFTER UPDATE ON periods
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION period_run_counts_apply();
CREATE TRIGGER periods_run_count_delete AFTER DELETE ON periods
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION period_run_counts_apply();

-- Existing decisions become attempt-1 runs. Undelivered ones are pending (delivered from here on);
-- refused ones failed. A delivered one decided in the last six hours (the default run.timeout) is
-- started and followed like a new run; an older one is recorded succeeded without a finished_at:
-- its outcome was never observed, its period had shown triggered since, and following it now would
-- only time it out and retry years of history at once.
INSERT INTO runs (rollup_id, period_lo, generation, attempt, run_id, state, cause, error, lease_token,
  created_at, due_at, deliveries, started_at, finished_at, timeout_at, check_at)
SELECT rollup_id, period_lo, generation, 1, idempotency_key,
  CASE
    WHEN failed_at IS NOT NULL THEN 'failed'
    WHEN delivered_at IS NULL THEN 'pending'
    WHEN delivered_at > now() - interval '6 hours' THEN 'started'
    ELSE 'succeeded'
  END,
  'trigger', last_error, lease_token, decided_at,
  CASE WHEN delivered_at IS NULL AND failed_at IS NULL THEN next_attempt_at END,
  attempts, delivered_at, failed_at,
  CASE WHEN delivered_at > now() - interval '6 hours' AND failed_at IS NULL THEN delivered_at + interval '6 hours' END,
  CASE WHEN delivered_at > now() - interval '6 hours' AND failed_at IS NULL THEN now() END
FROM triggers;

UPDATE periods p SET run_attempt = 1, run_state = r.state
FROM runs r
WHERE r.rollup_id = p.rollup_id AND r.period_lo = p.lo AND r.generation = p.generation AND r.attempt = 1;
