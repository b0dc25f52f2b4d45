-- The merged interval index: assets, the append-only event log, and merged segments.
-- Points are int8: microseconds since the Unix epoch for time assets, the value for integer ones.
CREATE EXTENSION IF NOT EXISTS btree_gist;

CREATE TABLE assets (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name text NOT NULL UNIQUE,
  domain text NOT NULL CHECK (domain IN ('time', 'integer')),
  zone text NOT NULL DEFAULT 'UTC',
  -- Ingest order: the seq of the newest accepted event. Per-asset writes lock this row.
  last_seq bigint NOT NULL DEFAULT 0,
  event_count bigint NOT NULL DEFAULT 0,
  segment_count bigint NOT NULL DEFAULT 0,
  -- Coverage only grows, so its extent is kept here rather than scanned for.
  covered_lo bigint,
  covered_hi bigint,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE events (
  asset_id bigint NOT NULL REFERENCES assets (id),
  seq bigint NOT NULL,
  key text NOT NULL,
  kind text NOT NULL CHECK (kind IN ('completion', 'replay_requirement')),
  lo bigint NOT NULL,
  hi bigint NOT NULL CHECK (hi >= lo),
  start_text text NOT NULL,
  end_text text NOT NULL,
  version text,
  event_id text,
  produced_at text,
  extra jsonb NOT NULL DEFAULT '{}',
  ingested_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (asset_id, seq),
  UNIQUE (asset_id, key)
);

CREATE TABLE segments (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  asset_id bigint NOT NULL REFERENCES assets (id),
  span int8range NOT NULL CHECK (NOT isempty(span)),
  version text,
  state text NOT NULL CHECK (state IN ('complete', 'replay_required')),
  required_version text CHECK ((state = 'replay_required') = (required_version IS NOT NULL)),
  -- Disjointness is a database guarantee; its GiST index also serves the overlap queries.
  CONSTRAINT segments_disjoint EXCLUDE USING gist (asset_id WITH =, span WITH &&)
);
