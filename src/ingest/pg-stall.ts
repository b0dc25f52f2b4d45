import { connectOnce, ping } from '../store/pg/db.js';
import type { Logger } from '../support/log.js';

export interface StallGuardOptions {
  /** How long a commit may go unanswered, with PostgreSQL silent to a probe, before ingest pauses. */
  readonly boundMs: number;
  /** How long the oldest batch has been committing, retries included, in milliseconds (0: none). */
  readonly oldestCommitMs: () => number;
  /** Whether PostgreSQL answers within `timeoutMs`. */
  readonly probe: (timeoutMs: number) => Promise<boolean>;
  /** Stops taking jobs and gives back the ones held; resolves with how many were given back. */
  readonly pause: () => Promise<number>;
  readonly resume: () => Promise<void>;
  readonly log: Logger;
}

/**
 * Watches the ingest commits for an instance cut off from PostgreSQL. A batch not committed after
 * half the bound (unanswered, or failing and retried) starts a probe (a new connection running
 * `select 1`); when that fails or stays unanswered for the other half, the instance is cut off: it
 * pauses and gives its jobs back, so the other instances commit them. A slow commit while the
 * probe answers (a lock wait, load) pauses nothing: any other instance would wait the same. While
 * paused it probes until PostgreSQL answers, then resumes.
 */
export class StallGuard {
  private stopped = false;
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  private pausedSince: number | undefined;

  constructor(private readonly options: StallGuardOptions) {}

  get paused(): boolean {
    return this.pausedSince !== undefined;
  }

  start(): void {
    this.loop ??= this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.loop;
  }

  private async run(): Promise<void> {
    const { boundMs, log } = this.options;
    const half = boundMs / 2;
    const tick = Math.min(1000, Math.max(50, boundMs / 10));
    while (!this.stopped) {
      if (this.pausedSince === undefined) {
        if (this.options.oldestCommitMs() >= half && !(await this.options.probe(half)) && !this.stopped) {
          const commitMs = Math.round(this.options.oldestCommitMs());
          this.pausedSince = Date.now();
          const returned = await this.options.pause();
          log.warn(
            { commit_ms: commitMs, returned, bound_ms: boundMs },
            'PostgreSQL does not answer: ingest paused, held jobs given back to the queue',
          );
        }
      } else if ((await this.options.probe(half)) && !this.stopped) {
        const pausedMs = Date.now() - this.pausedSince;
        this.pausedSince = undefined;
        await this.options.resume();
        log.info({ paused_ms: pausedMs }, 'PostgreSQL answers again: ingest resumed');
      }
      await this.sleep(tick);
    }
  }

  private sleep(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.wake = undefined;
        resolve();
      }, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}

/** Whether PostgreSQL answers `select 1` on a new connection within `timeoutMs`. */
export async function probePostgres(url: string, timeoutMs: number): Promise<boolean> {
  // A new connection each time: the pool's may be the ones stuck on a dead path.
  const probe = connectOnce(url, { connect_timeout: Math.max(1, Math.ceil(timeoutMs / 1000)) });
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      ping(probe).then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
      }),
    ]);
  } catch {
    return false;
  } finally {
    clearTimeout(timer);
    void probe.end({ timeout: 0 }).catch(() => {});
  }
}
