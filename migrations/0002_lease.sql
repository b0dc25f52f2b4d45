-- The scheduler lease: one row per scheduler name. All times are database time.
CREATE TABLE scheduler_leases (
  name text PRIMARY KEY,
  -- host:pid:random of the process that acquired it.
  holder text,
  -- Fencing token: grows with every acquisition, never with a renewal.
  token bigint NOT NULL DEFAULT 0,
  acquired_at timestamptz,
  renewed_at timestamptz,
  expires_at timestamptz,
  -- Redundant as a uniqueness rule (name is the key), but it makes token a key column. Trigger
  -- transactions lock the row FOR KEY SHARE (see src/scheduler/lease-sql.ts): that blocks an
  -- acquisition, which changes token, until they commit, yet lets renewals, which change only
  -- the times, proceed. Dropping this constraint silently removes the fence.
  CONSTRAINT scheduler_leases_fence UNIQUE (name, token)
);
