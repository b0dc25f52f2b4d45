-- Rollups: periods with their state, and the trigger decisions that double as the delivery outbox.
CREATE TABLE rollups (
  id text PRIMARY KEY,
  definition jsonb NOT NULL,
  -- Hash of the calendar part (every, timezone, begin, origin): periods are rebuilt when it changes.
  calendar_hash text NOT NULL,
  definition_hash text NOT NULL,
  -- Periods exist for [first period start, materialized_until).
  materialized_until bigint,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- How far into each upstream's event log the scheduler has marked touched periods.
CREATE TABLE rollup_cursors (
  rollup_id text NOT NULL REFERENCES rollups (id) ON DELETE CASCADE,
  asset_name text NOT NULL,
  seq bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (rollup_id, asset_name)
);

CREATE TABLE periods (
  rollup_id text NOT NULL REFERENCES rollups (id) ON DELETE CASCADE,
  lo bigint NOT NULL,
  hi bigint NOT NULL CHECK (hi > lo),
  key text NOT NULL,
  state text NOT NULL DEFAULT 'waiting'
    CHECK (state IN ('waiting', 'settling', 'triggered', 'rerun_pending', 'missed')),
  generation int NOT NULL DEFAULT 0 CHECK (generation >= 0),
  -- The smallest upstream ratio, and each upstream's, as of the last evaluation.
  ratio double precision NOT NULL DEFAULT 0,
  ratios jsonb NOT NULL DEFAULT '{}',
  satisfied_since timestamptz,
  last_change_at timestamptz,
  rerun text CHECK (rerun IN ('replay', 'update')),
  manual_requested boolean NOT NULL DEFAULT false,
  -- Per upstream asset: the newest event seq the last trigger decision saw. Later events rerun.
  trigger_seqs jsonb NOT NULL DEFAULT '{}',
  reason text,
  triggered_at timestamptz,
  dirty boolean NOT NULL DEFAULT true,
  due_at timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (rollup_id, lo)
);
CREATE INDEX periods_dirty ON periods (rollup_id, lo) WHERE dirty OR manual_requested;
CREATE INDEX periods_due ON periods (due_at) WHERE due_at IS NOT NULL;

-- One row per decision. The primary key makes a second decision for a generation impossible.
CREATE TABLE triggers (
  rollup_id text NOT NULL,
  period_lo bigint NOT NULL,
  generation int NOT NULL CHECK (generation >= 1),
  idempotency_key text NOT NULL UNIQUE CHECK (position(':' in idempotency_key) = 0),
  reason text NOT NULL CHECK (reason IN ('covered', 'ratio', 'deadline', 'replay', 'update', 'manual')),
  lease_token bigint NOT NULL,
  target jsonb NOT NULL,
  payload jsonb NOT NULL,
  decided_at timestamptz NOT NULL DEFAULT now(),
  attempts int NOT NULL DEFAULT 0,
  last_error text,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  delivered_at timestamptz,
  failed_at timestamptz,
  PRIMARY KEY (rollup_id, period_lo, generation),
  FOREIGN KEY (rollup_id, period_lo) REFERENCES periods (rollup_id, lo) ON DELETE CASCADE
);
CREATE INDEX triggers_undelivered ON triggers (next_attempt_at) WHERE delivered_at IS NULL AND failed_at IS NULL;
CREATE INDEX triggers_latest ON triggers (rollup_id, decided_at DESC);
