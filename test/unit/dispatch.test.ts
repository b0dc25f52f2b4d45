import { describe, expect, it } from 'vitest';
import type { Sql } from '../../src/index/db.js';
import { createLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics.js';
import { type DispatchContext, deliverDue, policyLookup } from '../../src/scheduler/dispatch.js';
import type { Targets } from '../../src/scheduler/targets/index.js';

/**
 * deliverDue with injected I/O: the outbox read answers two pending runs, the target accepts both,
 * and recording the first delivery fails (PostgreSQL refused a connection) while the second is
 * still being recorded.
 */
describe('deliverDue', () => {
  it('fails the pass only once every delivery in flight is recorded, so the next pass cannot deliver one again', async () => {
    const due = [0, 10].map((lo) => ({
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
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const events: string[] = [];
    let begins = 0;
    // The outbox read is the only statement awaited outside a transaction; fragments are never awaited.
    const sql = Object.assign(() => Promise.resolve(due), {
      begin: async () => {
        begins++;
        if (begins === 1) throw new Error('sorry, too many clients already');
        await gate;
        events.push('second delivery recorded');
        return null;
      },
    }) as unknown as Sql;
    const targets = { deliver: async () => ({ ok: true }) } as unknown as Targets;
    const ctx: DispatchContext = {
      sql,
      targets,
      concurrency: 2,
      log: createLogger('silent'),
      metrics: createMetrics(),
      policyOf: policyLookup(new Map()),
      targetTypeOf: () => 'queue',
    };
    const pass = deliverDue(ctx, new AbortController().signal).catch((error: Error) => {
      events.push(`pass failed: ${error.message}`);
    });
    await waitUntil(() => begins === 2);
    expect(events, 'the pass waits for the delivery still being recorded').toEqual([]);
    release();
    await pass;
    expect(events).toEqual(['second delivery recorded', 'pass failed: sorry, too many clients already']);
  });
});

/** Lets pending promise callbacks run until `ready` (no timers: each round is one macrotask). */
async function waitUntil(ready: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !ready(); i++) await new Promise((resolve) => setImmediate(resolve));
  if (!ready()) throw new Error('never ready');
}
