import type { PeriodState } from '../core/policy.js';
import type { Tx } from '../index/db.js';

/** The writes of one evaluation: period state changes and trigger decisions (the outbox). */

export interface PeriodUpdate {
  lo: number;
  oldGeneration: number;
  generation: number;
  state: PeriodState;
  reason: string | null;
  ratio: number;
  ratios: Record<string, number>;
  satisfiedSince: number | null;
  dueAt: number | null;
  seqs: Record<string, number> | null;
}

export interface TriggerRow {
  lo: number;
  generation: number;
  key: string;
  reason: string;
  payload: unknown;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export async function writeUpdates(
  tx: Tx,
  rollupId: string,
  updates: readonly PeriodUpdate[],
  now: Date,
): Promise<void> {
  const written = await tx`
    update periods p set
      state = u.state,
      generation = u.generation,
      ratio = u.ratio,
      ratios = u.ratios::jsonb,
      satisfied_since = u.satisfied_since,
      due_at = u.due_at,
      dirty = false,
      manual_requested = case when u.generation > p.generation then false else p.manual_requested end,
      rerun = case when u.generation > p.generation then null else p.rerun end,
      reason = coalesce(u.reason, p.reason),
      triggered_at = case when u.generation > p.generation then ${now} else p.triggered_at end,
      trigger_seqs = coalesce(u.seqs::jsonb, p.trigger_seqs),
      updated_at = now()
    from unnest(
      ${updates.map((u) => u.lo)}::int8[], ${updates.map((u) => u.oldGeneration)}::int4[],
      ${updates.map((u) => u.generation)}::int4[], ${updates.map((u) => u.state)}::text[],
      ${updates.map((u) => u.reason)}::text[], ${updates.map((u) => u.ratio)}::float8[],
      ${updates.map((u) => JSON.stringify(u.ratios))}::text[], ${updates.map((u) => iso(u.satisfiedSince))}::timestamptz[],
      ${updates.map((u) => iso(u.dueAt))}::timestamptz[], ${updates.map((u) => (u.seqs ? JSON.stringify(u.seqs) : null))}::text[]
    ) as u(lo, old_generation, generation, state, reason, ratio, ratios, satisfied_since, due_at, seqs)
    where p.rollup_id = ${rollupId} and p.lo = u.lo and p.generation = u.old_generation`;
  if (written.count !== updates.length) {
    throw new Error(`period generations moved under evaluation of ${rollupId}; retrying`);
  }
}

export async function writeTriggers(
  tx: Tx,
  rollupId: string,
  triggers: readonly TriggerRow[],
  target: unknown,
  token: number,
  now: Date,
): Promise<void> {
  if (triggers.length === 0) return;
  await tx`
    insert into triggers (rollup_id, period_lo, generation, idempotency_key, reason, lease_token, target, payload, decided_at)
    select ${rollupId}, t.lo, t.generation, t.key, t.reason, ${token}, ${tx.json(target as never)}, t.payload::jsonb, ${now}
    from unnest(
      ${triggers.map((t) => t.lo)}::int8[], ${triggers.map((t) => t.generation)}::int4[],
      ${triggers.map((t) => t.key)}::text[], ${triggers.map((t) => t.reason)}::text[],
      ${triggers.map((t) => JSON.stringify(t.payload))}::text[]
    ) as t(lo, generation, key, reason, payload)`;
}
