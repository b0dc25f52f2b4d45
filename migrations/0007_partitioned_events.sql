-- The event log becomes partitioned by ingest time, so retention drops whole partitions instead of
-- deleting rows (no bloat, no vacuum storm), and its rows become leaner (docs/decisions.md):
--   * kind is a boolean (replay), extra is null when empty;
--   * the idempotency key is not stored twice: 'id:' || event_id for producer ids, else the
--     content digest as 16 bytes (event_key() rebuilds the text);
--   * start_text/end_text are null when the producer's text is the canonical form of lo/hi.
-- A unique index on a partitioned table must contain the partition key, so (asset_id, key) can no
-- longer be a constraint: the commit checks every live partition through events_key (the asset and
-- a hash of the key) while it holds the asset's row lock, which already serialises writers per asset.
-- Partitions are named events_p<lo>_<hi> (Unix seconds) and made ahead by the daemon (a commit
-- that finds none makes its own); the existing log moves into one first partition, which ends with
-- the migration and ages out as a whole.
CREATE FUNCTION event_key(event_id text, digest bytea) RETURNS text
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN CASE WHEN event_id IS NOT NULL THEN 'id:' || event_id ELSE 'sha256:' || encode(digest, 'hex') END;

ALTER TABLE events RENAME TO events_unpartitioned;

CREATE TABLE events (
  asset_id bigint NOT NULL,
  seq bigint NOT NULL,
  lo bigint NOT NULL,
  hi bigint NOT NULL CHECK (hi >= lo),
  ingested_at timestamptz NOT NULL DEFAULT now(),
  replay boolean NOT NULL,
  event_id text,
  digest bytea CHECK ((event_id IS NULL) = (digest IS NOT NULL)),
  version text,
  produced_at text,
  start_text text,
  end_text text,
  extra jsonb
) PARTITION BY RANGE (ingested_at);
-- The scheduler follows each asset's log by seq; (asset_id, seq) is unique by the commit's lock.
CREATE INDEX events_asset_seq ON events (asset_id, seq);
CREATE INDEX events_key ON events (asset_id, hashtextextended(event_key(event_id, digest), asset_id));

-- Made ahead by the daemon (src/index/partitions.ts). CREATE TABLE ... PARTITION OF would lock the
-- whole log ACCESS EXCLUSIVE; a table attached afterwards needs only SHARE UPDATE EXCLUSIVE on it,
-- which ingest's inserts do not wait for. DDL takes no bind parameters, hence a function.
CREATE FUNCTION create_event_partition(lo bigint, hi bigint) RETURNS text
  LANGUAGE plpgsql AS $$
DECLARE
  name text := format('events_p%s_%s', lo, hi);
BEGIN
  EXECUTE format('CREATE TABLE %I (LIKE events INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', name);
  EXECUTE format('ALTER TABLE events ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
    name, to_timestamp(lo), to_timestamp(hi));
  RETURN name;
END $$;

DO $$
DECLARE
  hi timestamptz := date_trunc('second', now()) + interval '1 second';
BEGIN
  EXECUTE format(
    'CREATE TABLE %I PARTITION OF events FOR VALUES FROM (MINVALUE) TO (%L)',
    'events_p0_' || extract(epoch FROM hi)::bigint, hi);
END $$;

INSERT INTO events (asset_id, seq, lo, hi, ingested_at, replay, event_id, digest, version,
  produced_at, start_text, end_text, extra)
SELECT asset_id, seq, lo, hi, ingested_at, kind = 'replay_requirement', event_id,
  CASE WHEN event_id IS NULL THEN decode(substr(key, 8), 'hex') END, version,
  produced_at, start_text, end_text, nullif(extra, '{}')
FROM events_unpartitioned
ORDER BY ingested_at, asset_id, seq;

DROP TABLE events_unpartitioned;
