-- Deliveries begun of a run: counted, and committed, before each delivery goes out. A target
-- whose delivery is not idempotent by itself (an Airflow asset event has no key Airflow checks)
-- looks for an earlier delivery of the run before it sends one; a run none was ever begun for
-- has nothing to look for, so its first delivery goes out without that request. `deliveries`
-- counts the deliveries recorded, after the target answered; a crash between the two leaves
-- `sends` ahead, and the next delivery then looks first.
ALTER TABLE runs ADD COLUMN sends int NOT NULL DEFAULT 0;
