-- The dagster target reports its runs' outcomes as the airflow target does: its source.
-- NOT VALID: the rows already there satisfy the narrower check; no scan of the history is needed.
ALTER TABLE run_reports DROP CONSTRAINT run_reports_source_check;
ALTER TABLE run_reports ADD CONSTRAINT run_reports_source_check
  CHECK (source IN ('scheduler', 'queue', 'airflow', 'dagster', 'callback', 'manual')) NOT VALID;
