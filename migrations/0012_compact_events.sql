-- Event-log rows hold what producers sent in fewer bytes, without losing a character
-- (docs/decisions.md, "The event log stores producer fields in their compact form"):
--   * an id of lowercase hexadecimal digits, of even length (a commit or job digest), is kept as its
--     bytes in event_id_hex (40 characters: 41 -> 21 bytes); any other id stays text in event_id.
--     The id as sent is coalesce(event_id, encode(event_id_hex, 'hex'));
--   * produced_at spelled in UTC with Z and 0-6 fractional digits (what Date#toISOString, Java's
--     Instant and strftime('%Y-%m-%dT%H:%M:%SZ') write) is kept as the instant and its digit count
--     (25 -> 10 bytes); any other spelling stays text in produced_at_text.
--     event_produced_at(produced_at, produced_at_digits, produced_at_text) spells it back;
--   * extra is json (its text as sent, key order kept: 53 -> 34 bytes for a two-key object)
--     rather than jsonb;
--   * the 8-byte columns come first, so produced_at needs no alignment padding;
--   * the key index is the key's hash alone (int8): the asset in front of it made each entry
--     8 bytes wider. Lookups still recheck the asset and the key;
--   * the (asset_id, seq) index fills its leaf pages (fillfactor 100).
-- Changing a column's type and the column order rewrites every row, so, as 0007 did, the log is
-- copied into a new partitioned table with the same partitions (same names and bounds). A partition
-- whose DETACH CONCURRENTLY was interrupted is not copied: retention had already found every cursor
-- past it, and it goes with the old log.
-- The rules for the compact forms are also in src/core/event-row.ts; keep the two alike.

-- The old partitions' indexes go first, so that the new partitions' indexes get the names
-- PostgreSQL chooses on a fresh install.
DROP INDEX events_key;
DROP INDEX events_asset_seq;
ALTER TABLE events RENAME TO events_0011;
DO $$
DECLARE
  part record;
BEGIN
  FOR part IN
    SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'events_0011'::regclass
  LOOP
    EXECUTE format('ALTER TABLE %I RENAME TO %I', part.name, part.name || '_0011');
  END LOOP;
END $$;

CREATE FUNCTION event_key(event_id text, event_id_hex bytea, digest bytea) RETURNS text
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN CASE
    WHEN event_id IS NOT NULL THEN 'id:' || event_id
    WHEN event_id_hex IS NOT NULL THEN 'id:' || encode(event_id_hex, 'hex')
    ELSE 'sha256:' || encode(digest, 'hex')
  END;

-- The producer's id as it sent it, whichever column holds it (for operators' and tests' queries).
CREATE FUNCTION event_id_text(event_id text, event_id_hex bytea) RETURNS text
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN coalesce(event_id, encode(event_id_hex, 'hex'));

-- produced_at as the producer wrote it.
CREATE FUNCTION event_produced_at(produced_at timestamptz, digits smallint, produced_at_text text)
  RETURNS text LANGUAGE sql STABLE PARALLEL SAFE
  RETURN coalesce(produced_at_text,
    to_char(produced_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS')
      || CASE WHEN digits > 0 THEN '.' || left(to_char(produced_at AT TIME ZONE 'UTC', 'US'), digits) ELSE '' END
      || 'Z');

CREATE TABLE events (
  asset_id bigint NOT NULL,
  seq bigint NOT NULL,
  lo bigint NOT NULL,
  hi bigint NOT NULL CHECK (hi >= lo),
  ingested_at timestamptz NOT NULL DEFAULT now(),
  produced_at timestamptz,
  produced_at_digits smallint CHECK (produced_at_digits BETWEEN 0 AND 6),
  replay boolean NOT NULL,
  event_id text,
  event_id_hex bytea,
  digest bytea,
  version text,
  produced_at_text text,
  start_text text,
  end_text text,
  extra json,
  CONSTRAINT events_one_key CHECK (num_nonnulls(event_id, event_id_hex, digest) = 1),
  CONSTRAINT events_produced_at_one_form CHECK (
    (produced_at IS NULL) = (produced_at_digits IS NULL)
    AND (produced_at IS NULL OR produced_at_text IS NULL))
) PARTITION BY RANGE (ingested_at);
DO $$
DECLARE
  part record;
BEGIN
  FOR part IN
    SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'events_0011'::regclass AND NOT i.inhdetachpending
  LOOP
    EXECUTE format('CREATE TABLE %I PARTITION OF events %s', left(part.name, -5), part.bound);
  END LOOP;
END $$;

INSERT INTO events (asset_id, seq, lo, hi, ingested_at, produced_at, produced_at_digits, replay,
  event_id, event_id_hex, digest, version, produced_at_text, start_text, end_text, extra)
SELECT o.asset_id, o.seq, o.lo, o.hi, o.ingested_at,
  CASE WHEN f.utc THEN o.produced_at::timestamptz END, CASE WHEN f.utc THEN f.digits END,
  o.replay,
  CASE WHEN NOT f.hex THEN o.event_id END, CASE WHEN f.hex THEN decode(o.event_id, 'hex') END,
  o.digest, o.version,
  CASE WHEN NOT f.utc THEN o.produced_at END, o.start_text, o.end_text, o.extra::json
FROM events_0011 o
CROSS JOIN LATERAL (
  SELECT coalesce(o.event_id ~ '^([0-9a-f]{2})+$', false) AS hex,
    coalesce(length(substring(o.produced_at FROM '\.(\d+)Z$')), 0)::int2 AS digits,
    o.produced_at ~ '^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?Z$' AS shaped
) s
CROSS JOIN LATERAL (
  -- The cast only for text of that shape, which every logged produced_at of it parses as.
  SELECT s.hex, s.digits, coalesce(CASE WHEN s.shaped THEN
    event_produced_at(o.produced_at::timestamptz, s.digits, NULL) = o.produced_at END, false) AS utc
) f
ORDER BY o.ingested_at, o.asset_id, o.seq;

-- The indexes come after the copy: built by sorting, not entry by entry. Full leaf pages for
-- (asset_id, seq): an asset's entries arrive in seq order, each after the asset's last, so a split
-- page on the left is never written again (the log is append-only).
CREATE INDEX events_asset_seq ON events (asset_id, seq) WITH (fillfactor = 100);
CREATE INDEX events_key ON events (hashtextextended(event_key(event_id, event_id_hex, digest), asset_id));

DROP TABLE events_0011;
DROP FUNCTION event_key(text, bytea);
