import { listenForCommits } from '../store/assets/commit-listen.js';
import type { Sql } from '../store/pg/db.js';
import type { Logger } from '../support/log.js';
import { HttpError } from './errors.js';

/** How a wait ended: its check said done, its deadline passed, its client left, the server closes. */
export type WaitEnd = 'done' | 'timeout' | 'aborted' | 'closing';

/** Checks of waiting requests run at most this many at once (each is one coverage query). */
const CHECKS_AT_ONCE = 4;
/** What a refused waiter is told to wait before asking again. */
const RETRY_AFTER_SECONDS = 5;

interface Waiter {
  readonly asset: string;
  /** Set by a commit notification; cleared when a check starts. */
  dirty: boolean;
  wake(): void;
}

/**
 * Coverage requests held open by `wait=` (README "Waiting for coverage"): each is woken by the
 * commit notifications of its asset (the channel the scheduler listens on, sent by every commit
 * into the index, so any instance, leader or not, ingesting or not, hears every commit), checks
 * its window again, and answers once the check says so or its deadline passes. No polling: a
 * waiter queries only after a commit that touched its asset. At most `max` wait at once per
 * instance; checks run a few at a time, and a waiter notified while its check runs checks once
 * more after it, so a burst of commits costs each waiter one query in flight, never one per commit.
 */
export class CoverageWaiters {
  private readonly byAsset = new Map<string, Set<Waiter>>();
  private count = 0;
  private listening: Promise<void> | undefined;
  private unlisten: (() => Promise<void>) | undefined;
  private closing = false;
  private readonly closers = new Set<() => void>();
  private running = 0;
  private readonly queued: Array<() => void> = [];

  constructor(
    private readonly sql: Sql,
    private readonly max: number,
    private readonly log: Logger,
    private readonly onCount: (waiters: number) => void = () => {},
  ) {}

  get size(): number {
    return this.count;
  }

  /**
   * Holds a request until `check` answers true (checked at once, then after each commit of
   * `asset`), `deadline` (epoch ms) passes, `signal` aborts (the client left) or the server
   * closes. A request over the bound is refused with a 503 `too_many_waiters` and Retry-After.
   */
  async wait(
    asset: string,
    deadline: number,
    signal: AbortSignal,
    check: () => Promise<boolean>,
  ): Promise<WaitEnd> {
    if (this.closing) return 'closing';
    if (this.count >= this.max) {
      throw new HttpError(
        503,
        'too_many_waiters',
        `this instance already holds ${this.max} waiting coverage requests (http.max_waiters); ask again without wait, or later`,
        undefined,
        { 'retry-after': String(RETRY_AFTER_SECONDS) },
      );
    }
    this.count++;
    this.onCount(this.count);
    let wake: () => void = () => {};
    const waiter: Waiter = { asset, dirty: true, wake: () => wake() };
    const peers = this.byAsset.get(asset) ?? new Set<Waiter>();
    this.byAsset.set(asset, peers);
    peers.add(waiter);
    let ended: WaitEnd | undefined;
    const end = (why: WaitEnd) => {
      ended ??= why;
      wake();
    };
    const timer = setTimeout(() => end('timeout'), Math.max(0, deadline - Date.now()));
    const onAbort = () => end('aborted');
    const onClose = () => end('closing');
    signal.addEventListener('abort', onAbort);
    this.closers.add(onClose);
    try {
      // Listening before the first check: a commit between that check and the listen is heard.
      await this.listen();
      while (ended === undefined) {
        if (waiter.dirty) {
          waiter.dirty = false;
          if (await this.limited(check)) return 'done';
          continue;
        }
        await new Promise<void>((resolve) => {
          wake = resolve;
          if (waiter.dirty || ended !== undefined) resolve();
        });
        wake = () => {};
      }
      return ended;
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      this.closers.delete(onClose);
      peers.delete(waiter);
      if (peers.size === 0) this.byAsset.delete(asset);
      this.count--;
      this.onCount(this.count);
    }
  }

  /** Ends every wait at once (each answers with what it has) and stops listening. */
  async close(): Promise<void> {
    this.closing = true;
    for (const close of this.closers) close();
    await this.unlisten?.().catch(() => {});
  }

  /** Started at the first wait, kept afterwards: one connection per instance, only if anyone waits. */
  private listen(): Promise<void> {
    this.listening ??= listenForCommits(this.sql, {
      onCommit: (assets) => this.notify(assets),
      // (Re)connected: notifications may have been missed in between, so every waiter checks again.
      onConnect: () => this.notify('any'),
    }).then(
      (unlisten) => {
        this.unlisten = unlisten;
      },
      (error: unknown) => {
        this.listening = undefined; // the next wait tries again
        this.log.warn({ err: error }, 'cannot listen for commits; waiting coverage requests fail');
        throw error;
      },
    );
    return this.listening;
  }

  private notify(assets: readonly string[] | 'any'): void {
    const sets = assets === 'any' ? [...this.byAsset.values()] : assets.map((a) => this.byAsset.get(a));
    for (const set of sets) {
      for (const waiter of set ?? []) {
        waiter.dirty = true;
        waiter.wake();
      }
    }
  }

  /** Runs `work` in one of CHECKS_AT_ONCE slots; a finished check hands its slot to the next in line. */
  private async limited<T>(work: () => Promise<T>): Promise<T> {
    if (this.running < CHECKS_AT_ONCE) this.running++;
    else await new Promise<void>((resolve) => this.queued.push(resolve));
    try {
      return await work();
    } finally {
      const next = this.queued.shift();
      if (next) next();
      else this.running--;
    }
  }
}
