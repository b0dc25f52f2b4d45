import { backoffMs } from '../store/pg/transient.js';
import { Alarm } from '../support/alarm.js';
import type { Hold } from './hold.js';

export interface GroupCommitOptions<T, R> {
  /** Commits items in one transaction; returns one result per item, in order. */
  readonly commit: (items: T[]) => Promise<R[]>;
  readonly isTransient: (error: unknown) => boolean;
  readonly maxBatch: number;
  /**
   * How long the first item of a batch waits for others. At 0 the batch is flushed once the
   * requests already read from the network have added theirs (setImmediate): concurrent callers
   * share a commit, and a lone one waits for nothing.
   */
  readonly maxWaitMs: number;
  /** Transactions in flight at once; more batches wait and grow meanwhile. */
  readonly maxInFlight: number;
  /**
   * Attempts at a batch that fails transiently before its callers are rejected with the last
   * error (a caller that answers a request cannot wait for ever). Unbounded when absent: the
   * worker's jobs stay active and come back by lock expiry should it stop.
   */
  readonly attempts?: number;
  readonly onRetry?: (error: unknown, attempt: number, size: number) => void;
  readonly onCommit?: (size: number, seconds: number) => void;
}

interface Pending<T, R> {
  readonly item: T;
  readonly resolve: (result: R) => void;
  readonly reject: (error: unknown) => void;
  /** Released when the caller withdraws: it no longer waits for this item's commit. */
  readonly hold: Hold | undefined;
  /** The batch committing it, once flushed. */
  batch: Batch<T, R> | undefined;
}

/** A batch being committed (retries included), from its start, to tell a stuck one. */
interface Batch<T, R> {
  readonly at: number;
  readonly items: Pending<T, R>[];
  /** Items whose caller still waits; at 0 the batch frees its slot. */
  waiting: number;
  readonly allWithdrawn: Promise<void>;
  readonly settleWithdrawn: () => void;
}

/**
 * Group commit: callers add one item each and wait; items are committed together when a batch is
 * full or after maxWaitMs. Transient failures are retried with backoff for as long as it takes
 * (the callers' jobs stay active meanwhile), or `attempts` times; any other failure splits the
 * batch, so one poisoned item fails alone and every caller of a failing commit hears of it.
 * After abandon(), waiting callers are left unsettled: their jobs go back to the queue by lock
 * expiry, never failed.
 *
 * A caller may withdraw its item by releasing its Hold (its job was given back to the queue): the
 * item leaves the pending batch, or is dropped from an in-flight batch's retries; a batch whose
 * items are all withdrawn frees its in-flight slot at once, though its transaction may still
 * commit late (harmless: commits are idempotent by event key).
 */
export class GroupCommitter<T, R> {
  private pending: Pending<T, R>[] = [];
  private timer: { cancel(): void } | undefined;
  private inFlight = 0;
  private readonly committing = new Set<Batch<T, R>>();
  private closed = false;
  private readonly drained = new Set<() => void>();
  private readonly alarm = new Alarm();

  constructor(private readonly options: GroupCommitOptions<T, R>) {}

  add(item: T, hold?: Hold): Promise<R> {
    if (this.closed) return new Promise(() => {});
    if (hold?.released) return Promise.reject(hold.reason);
    return new Promise<R>((resolve, reject) => {
      const entry: Pending<T, R> = { item, resolve, reject, hold, batch: undefined };
      this.pending.push(entry);
      hold?.onRelease((reason) => {
        if (entry.batch) {
          if (--entry.batch.waiting === 0) entry.batch.settleWithdrawn();
        } else {
          const at = this.pending.indexOf(entry);
          if (at >= 0) this.pending.splice(at, 1);
        }
        reject(reason);
      });
      if (this.pending.length >= this.options.maxBatch) this.flush();
      else this.timer ??= this.later(() => this.flush());
    });
  }

  /**
   * How long the oldest batch still committing has been at it, retries after failures included,
   * counting only batches with a caller still waiting (0: none).
   */
  oldestCommitMs(now = performance.now()): number {
    let oldest = now;
    for (const { at, waiting } of this.committing) if (waiting > 0) oldest = Math.min(oldest, at);
    return now - oldest;
  }

  get size(): number {
    return this.pending.length + this.inFlight;
  }

  /** Commits everything added so far; resolves when nothing is pending or in flight. */
  drain(): Promise<void> {
    this.flush();
    if (this.size === 0) return Promise.resolve();
    return new Promise<void>((resolve) => this.drained.add(resolve));
  }

  /** Stops retrying and takes no more work; callers still waiting are never settled. */
  abandon(): void {
    this.closed = true;
    this.timer?.cancel();
    this.alarm.wake();
  }

  private later(flush: () => void): { cancel(): void } {
    if (this.options.maxWaitMs <= 0) {
      const immediate = setImmediate(flush);
      return { cancel: () => clearImmediate(immediate) };
    }
    const timeout = setTimeout(flush, this.options.maxWaitMs);
    return { cancel: () => clearTimeout(timeout) };
  }

  private flush(): void {
    this.timer?.cancel();
    this.timer = undefined;
    while (!this.closed && this.pending.length > 0 && this.inFlight < this.options.maxInFlight) {
      const batch = newBatch(this.pending.splice(0, this.options.maxBatch));
      this.committing.add(batch);
      this.inFlight++;
      void Promise.race([this.run(batch.items), batch.allWithdrawn]).finally(() => {
        this.committing.delete(batch);
        this.inFlight--;
        if (this.pending.length > 0) this.flush();
        if (this.size === 0) {
          for (const resolve of this.drained) resolve();
          this.drained.clear();
        }
      });
    }
  }

  private async run(all: Pending<T, R>[]): Promise<void> {
    let batch = all;
    for (let attempt = 0; !this.closed; attempt++) {
      batch = batch.filter((p) => !p.hold?.released);
      if (batch.length === 0) return;
      const started = performance.now();
      try {
        const results = await this.options.commit(batch.map((p) => p.item));
        this.options.onCommit?.(batch.length, (performance.now() - started) / 1000);
        batch.forEach((p, i) => {
          p.resolve(results[i]!);
        });
        return;
      } catch (error) {
        if (this.options.isTransient(error)) {
          if (attempt + 1 >= (this.options.attempts ?? Number.POSITIVE_INFINITY)) {
            for (const p of batch) p.reject(error);
            return;
          }
          this.options.onRetry?.(error, attempt, batch.length);
          await this.alarm.sleep(backoffMs(attempt));
          continue;
        }
        if (batch.length === 1) {
          batch[0]!.reject(error);
          return;
        }
        const half = Math.ceil(batch.length / 2);
        await this.run(batch.slice(0, half));
        await this.run(batch.slice(half));
        return;
      }
    }
  }
}

/** A batch of flushed items; its allWithdrawn resolves once every one was withdrawn (never, if one cannot be). */
function newBatch<T, R>(items: Pending<T, R>[]): Batch<T, R> {
  let settleWithdrawn = () => {};
  const allWithdrawn = new Promise<void>((resolve) => {
    settleWithdrawn = resolve;
  });
  const batch: Batch<T, R> = {
    at: performance.now(),
    items,
    waiting: items.length,
    allWithdrawn,
    settleWithdrawn,
  };
  for (const p of items) p.batch = batch;
  return batch;
}
