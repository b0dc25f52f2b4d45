/**
 * A job's hold on its pending commit: released when ingest pauses (PostgreSQL does not answer), so
 * the job goes back to the queue. One per event job, so it is lean: the AbortController it
 * replaces (an EventTarget, a listener per item, a promise per item per batch) cost about 5 µs of
 * the ingest thread per event in bench:ingest's profile, garbage apart.
 */
export class Hold {
  private releasedWith: { readonly reason: unknown } | undefined;
  private listener: ((reason: unknown) => void) | undefined;

  get released(): boolean {
    return this.releasedWith !== undefined;
  }

  get reason(): unknown {
    return this.releasedWith?.reason;
  }

  /** Gives the job back: its waiting caller is rejected with `reason`; a second release is a no-op. */
  release(reason: unknown): void {
    if (this.releasedWith) return;
    this.releasedWith = { reason };
    const listener = this.listener;
    this.listener = undefined;
    listener?.(reason);
  }

  /** The one party told of a release (the committer holding the item); a later call replaces it. */
  onRelease(listener: (reason: unknown) => void): void {
    this.listener = listener;
  }
}
