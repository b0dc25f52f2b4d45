-- Sparse periods: a period has a row only once something happened to it (an event
-- touched it, a decision, a pending timer or a manual request). Every other period since `begin`
-- is derived from the calendar and the policy (src/core/periods.ts), so nothing is materialised.

-- Rows that only ever existed because the calendar was materialised: never touched, never decided,
-- nothing requested. Their derived state is the same (waiting, ratio 0, or missed past a deadline).
DELETE FROM periods
WHERE generation = 0 AND state = 'waiting' AND last_change_at IS NULL AND NOT manual_requested;

ALTER TABLE rollups DROP COLUMN materialized_until;

-- Pending work is claimed newest first across rollups (fresh periods never wait behind history).
DROP INDEX periods_dirty;
CREATE INDEX periods_pending ON periods (lo DESC) WHERE dirty OR manual_requested;

-- Stored periods per rollup and state, kept by the statements that change them, so listings and
-- gauges read a handful of rows instead of counting years of periods.
CREATE TABLE period_counts (
  rollup_id text NOT NULL,
  state text NOT NULL,
  n bigint NOT NULL,
  PRIMARY KEY (rollup_id, state)
);

INSERT INTO period_counts (rollup_id, state, n)
SELECT rollup_id, state, count(*) FROM periods GROUP BY 1, 2;

-- Statement-level: one upsert per (rollup, state) a statement touched, not one per row.
CREATE FUNCTION period_counts_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO period_counts AS c (rollup_id, state, n)
    SELECT rollup_id, state, count(*) FROM new_rows GROUP BY 1, 2
    ON CONFLICT (rollup_id, state) DO UPDATE SET n = c.n + excluded.n;
  ELSIF TG_OP = 'DELETE' THEN
    UPDATE period_counts c SET n = c.n - d.n
    FROM (SELECT rollup_id, state, count(*) AS n FROM old_rows GROUP BY 1, 2) d
    WHERE c.rollup_id = d.rollup_id AND c.state = d.state;
  ELSE
    INSERT INTO period_counts AS c (rollup_id, state, n)
    SELECT rollup_id, state, sum(n) FROM (
      SELECT rollup_id, state, count(*) AS n FROM new_rows GROUP BY 1, 2
      UNION ALL
      SELECT rollup_id, state, -count(*) FROM old_rows GROUP BY 1, 2
    ) d GROUP BY 1, 2 HAVING sum(n) <> 0
    ON CONFLICT (rollup_id, state) DO UPDATE SET n = c.n + excluded.n;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER periods_count_insert AFTER INSERT ON periods
  REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION period_counts_apply();
CREATE TRIGGER periods_count_update AFTER UPDATE ON periods
  REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION period_counts_apply();
CREATE TRIGGER periods_count_delete AFTER DELETE ON periods
  REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION period_counts_apply();
