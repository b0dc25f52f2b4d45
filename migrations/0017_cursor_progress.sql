-- A rollup marks a bounded number of periods per transaction, newest first, so one event or one
-- segment over millions of its periods is marked over several passes instead of in one walk that
-- holds the scheduler (docs/decisions.md, "Marking is bounded per pass"). Where a cursor stopped
-- inside such a span:
-- event_below: the event after `seq` has its periods from this point up marked; those below not yet.
-- seed_below: the rollup is still seeding from this upstream's merged segments, which overlap
-- periods below this point not marked yet (the log is followed from `seq` meanwhile).
-- Null: nothing pending.
ALTER TABLE rollup_cursors
  ADD COLUMN event_below bigint,
  ADD COLUMN seed_below bigint;
