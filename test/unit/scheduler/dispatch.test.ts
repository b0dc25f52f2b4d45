import { describe, expect, it } from 'vitest';
import { DEFAULT_RUN_POLICY } from '../../../src/core/runs/runs.js';
import { createMetrics } from '../../../src/metrics/registry.js';
import { type DispatchContext, deliverDue } from '../../../src/scheduler/dispatch.js';
import type { Sql } from '../../../src/store/pg/db.js';
import { createLogger } from '../../../src/support/log.js';
import type { Targets } from '../../../src/targets/targets.js';

/**
 * deliverDue with injected I/O: the outbox read answers two pending runs; the target accepts the
 * first at once and holds the second; recording the batch fails (PostgreSQL refused a connection).
 */
/** Two pending runs of one rollup, as the outbox read answers them. */
const DUE = [0, 10].map((lo) => ({
  rollup_id: 'r',
  period_lo: lo,
  generation: 1,
  attempt: 1,
  run_id: `r@${lo}#1`,
  deliveries: 0,
  lease_token: 1,
  target: { type: 'queue', queue: 'downstream' },
  payload: { rollup: 'r', idempotency_key: `r@${lo}#1`, period: { key: String(lo) } },
}));

const context = (sql: Sql, targets: Targets): DispatchContext => ({
  sql,
  targets,
  concurrency: 2,
  log: createLogger('silent'),
  metrics: createMetrics(),
  policyOf: () => DEFAULT_RUN_POLICY,
  targetTypeOf: () => 'queue',
  rollupOf: () => undefined,
  rollupIds: () => ['r'],
});

describe('deliverDue', () => {
  it('fails the pass only once no delivery is in flight, so the next pass cannot deliver one again', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const events: string[] = [];
    let deliveries = 0;
    // The outbox read is the only statement awaited outside a transaction; fragments are never awaited.
    const sql = Object.assign(() => Promise.resolve(DUE), {
      begin: async () => {
        events.push('batch recorded');
        throw new Error('sorry, too many clients already');
      },
    }) as unknown as Sql;
    const targets = {
      deliver: async () => {
        if (++deliveries === 2) {
          await gate;
          events.push('second delivered');
        }
        return { ok: true };
      },
    } as unknown as Targets;
    const pass = deliverDue(context(sql, targets), new AbortController().signal).catch((error: Error) => {
      events.push(`pass failed: ${error.message}`);
    });
    await waitUntil(() => deliveries === 2);
    expect(events, 'the pass waits for the delivery still in flight').toEqual([]);
    release();
    await pass;
    expect(events).toEqual([
      'second delivered',
      'batch recorded',
      'pass failed: sorry, too many clients already',
    ]);
  });

  it('a delivery that throws fails the pass only once the others in flight are done', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const events: string[] = [];
    let deliveries = 0;
    const sql = Object.assign(() => Promise.resolve(DUE), {
      begin: async () => {
        events.push('batch recorded');
        return [];
      },
    }) as unknown as Sql;
    const targets = {
      deliver: async () => {
        if (++deliveries === 1) throw new Error('target exploded');
        await gate;
        events.push('second delivered');
        return { ok: true };
      },
    } as unknown as Targets;
    const pass = deliverDue(context(sql, targets), new AbortController().signal).catch((error: Error) => {
      events.push(`pass failed: ${error.message}`);
    });
    await waitUntil(() => deliveries === 2);
    expect(events).toEqual([]);
    release();
    await pass;
    expect(events).toEqual(['second delivered', 'pass failed: target exploded']);
  });
});

/** Lets pending promise callbacks run until `ready` (no timers: each round is one macrotask). */
async function waitUntil(ready: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !ready(); i++) await new Promise((resolve) => setImmediate(resolve));
  if (!ready()) throw new Error('never ready');
}
