-- The event log is the hottest table: every accepted event is one row. Its foreign key to assets
-- cost a row-level referential check per insert (about a fifth of PostgreSQL's CPU in
-- bench:ingest) to guard an invariant the commit already holds: the asset ids come from the rows
-- the same transaction has just locked, and assets are never deleted. See docs/decisions.md.
ALTER TABLE events DROP CONSTRAINT events_asset_id_fkey;
