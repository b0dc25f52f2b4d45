/**
 * What the scheduler tells listeners (tests, embedders) as it works: `pass` after every completed
 * pass, `decided` for every period an evaluation committed. Emitted after the commit, so a listener
 * that sees a decision can read it from PostgreSQL. A listener must not throw; if it does, the
 * error is logged and the scheduler goes on.
 */
import type { EventEmitter } from 'node:events';
import type { PeriodState } from '../core/periods/policy.js';
import type { Logger } from '../support/log.js';

export interface PassEvent {
  /** The lease token the pass ran under. */
  readonly token: number;
  /** The pass's reading of the scheduler clock (database time by default). */
  readonly now: Date;
  /** Periods touched by new events were marked in this pass. */
  readonly marked: boolean;
  /** Periods evaluated and triggers decided in this pass. */
  readonly evaluated: number;
  readonly triggered: number;
  /** Deadline rows given to owed periods in this pass (decided on a later pass). */
  readonly owed: number;
  /** Work is left (a backlog, or fresh events arrived meanwhile): the next pass starts at once. */
  readonly busy: boolean;
  /** How long the scheduler may sleep before the next pass unless woken. */
  readonly sleepMs: number;
}

export interface DecidedEvent {
  readonly rollup: string;
  /** The period's key and start (`lo`, as stored). */
  readonly period: string;
  readonly lo: number;
  /** The state the evaluation left the period in. */
  readonly state: PeriodState;
  readonly generation: number;
  /** The trigger decided now, or null when the evaluation only moved (or kept) the state. */
  readonly trigger: { readonly reason: string; readonly idempotencyKey: string } | null;
}

export type SchedulerEvents = {
  pass: [PassEvent];
  decided: [DecidedEvent];
};

/** Emits to listeners; one that throws is logged, never allowed to fail the scheduler's pass. */
export function emitSafely<K extends keyof SchedulerEvents>(
  emitter: EventEmitter<SchedulerEvents>,
  log: Logger,
  name: K,
  ...args: SchedulerEvents[K]
): void {
  try {
    (emitter.emit as (n: K, ...a: SchedulerEvents[K]) => boolean).call(emitter, name, ...args);
  } catch (err) {
    log.warn({ err, event: name }, 'scheduler event listener failed');
  }
}
