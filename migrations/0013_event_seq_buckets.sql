-- The log's (asset_id, seq) index keys each entry by seq's bucket of 8 (seq >> 3) instead of seq,
-- so that btree deduplication keeps consecutive events of an asset as one posting list: the key
-- once and 6 bytes per event, instead of 28 per event (docs/decisions.md, "The event log's seq
-- index keys buckets of 8 events"). Readers spell the bucket out beside seq
-- (`seq >> 3 >= $cursor >> 3 AND seq > $cursor ORDER BY seq >> 3, seq`): the index finds the
-- buckets, the condition on seq keeps the rows, at most 7 more read per look-up.
-- Only the index changes, no row: it is built by sorting, on every partition, in the migration's
-- transaction (ingest waits for it, about a second per million events).
DROP INDEX events_asset_seq;
CREATE INDEX events_asset_seq ON events (asset_id, (seq >> 3));
