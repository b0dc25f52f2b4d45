-- Repair requests: the daemon asks a producer for the ranges that hold a period back and
-- follows each request by what the index then covers. Their own home beside runs: a request, the
-- periods waiting on it, and one row per attempt, which is also the delivery outbox (an attempt is
-- decided in the scheduler's fenced transaction, then delivered at least once with its own key).
-- Every statement on these tables is in src/index/repairs.ts.
CREATE TABLE repair_requests (
  id bigserial PRIMARY KEY,
  asset text NOT NULL,
  domain text NOT NULL CHECK (domain IN ('time', 'integer')),
  -- The rollup and period that first owed it; null for a request made by hand.
  rollup_id text,
  period_lo bigint,
  period jsonb,
  state text NOT NULL DEFAULT 'open'
    CHECK (state IN ('open', 'partial', 'repaired', 'abandoned', 'cancelled')),
  -- What its first attempt asked for: no other request asks for these points while this one is
  -- open or abandoned.
  span int8multirange NOT NULL,
  -- The ranges its current attempt asked for: [{lo, hi, kind, required_version}].
  ranges jsonb NOT NULL,
  ranges_total int NOT NULL,
  missing_total bigint NOT NULL,
  attempt int NOT NULL DEFAULT 1 CHECK (attempt >= 1),
  attempts int NOT NULL CHECK (attempts >= 1),
  every_ms bigint NOT NULL,
  -- Where it is sent, secrets redacted (scheduler/targets/secrets.ts).
  target jsonb NOT NULL,
  lease_token bigint,
  requested_at timestamptz NOT NULL,
  -- While open or partial: when the next attempt (or the abandonment) is due.
  next_at timestamptz,
  -- assets.last_seq when it was last followed: a newer event makes it looked at again.
  seen_seq bigint NOT NULL DEFAULT 0,
  finished_at timestamptz
);
CREATE INDEX repair_requests_active ON repair_requests (asset) WHERE state IN ('open', 'partial');
CREATE INDEX repair_requests_due ON repair_requests (next_at) WHERE state IN ('open', 'partial');
CREATE INDEX repair_requests_span ON repair_requests USING gist (span) WHERE state IN ('open', 'partial', 'abandoned');
CREATE INDEX repair_requests_state ON repair_requests (state, id);
CREATE INDEX repair_requests_asset ON repair_requests (asset, id);
CREATE INDEX repair_requests_period ON repair_requests (rollup_id, period_lo);

-- The periods waiting on a request (the one that made it and any other rollup's over the same
-- range). A period decided otherwise leaves; a request of rollups that no period waits on is cancelled.
CREATE TABLE repair_waiters (
  request_id bigint NOT NULL REFERENCES repair_requests (id) ON DELETE CASCADE,
  rollup_id text NOT NULL,
  period_lo bigint NOT NULL,
  period_key text NOT NULL,
  PRIMARY KEY (request_id, rollup_id, period_lo)
);
CREATE INDEX repair_waiters_period ON repair_waiters (rollup_id, period_lo);

-- One row per attempt: its payload as sent, and its delivery (the outbox).
CREATE TABLE repair_attempts (
  request_id bigint NOT NULL REFERENCES repair_requests (id) ON DELETE CASCADE,
  attempt int NOT NULL CHECK (attempt >= 1),
  idempotency_key text NOT NULL UNIQUE CHECK (position(':' in idempotency_key) = 0),
  payload jsonb NOT NULL,
  lease_token bigint,
  created_at timestamptz NOT NULL,
  -- Not yet delivered: when the next delivery try is due; null once delivered or refused for good.
  due_at timestamptz,
  deliveries int NOT NULL DEFAULT 0,
  delivered_at timestamptz,
  error text,
  PRIMARY KEY (request_id, attempt)
);
CREATE INDEX repair_attempts_due ON repair_attempts (due_at) WHERE due_at IS NOT NULL;
