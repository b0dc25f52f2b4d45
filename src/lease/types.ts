import type { Logger } from '../support/log.js';
import type { EndedSessions } from './former-holder.js';
import type { LeaseStore } from './store.js';

/** What a SchedulerLease is built from and what its status() reports. */

export interface SchedulerLeaseOptions {
  /** Its statements (postgresLeaseStore): best on a small pool of its own, so renewals never queue behind busy evaluation. */
  readonly store: LeaseStore;
  readonly name: string;
  readonly ttlMs: number;
  readonly renewEveryMs: number;
  readonly retryEveryMs: number;
  readonly holderId?: string;
  /** Default: this process's (store/pg/instance.ts); the default holder id ends with `@` and it. */
  readonly instanceId?: string;
  /** Told of the former holder's sessions ended (or refused) after a takeover (former-holder.ts). */
  readonly onSessionsEnded?: (result: EndedSessions) => void;
  readonly log: Logger;
  /** Monotonic milliseconds (default performance.now); tests jump it to simulate a paused process. */
  readonly now?: () => number;
  /** Each lease statement is cancelled after this long; default min(renewEvery, ttl / 3). */
  readonly statementTimeoutMs?: number;
  /** How long before the database expiry this process stops by its own clock; default ttl / 5. */
  readonly safetyMarginMs?: number;
}

export interface LeaseStatus {
  readonly name: string;
  /** This process's id in the lease table: the holder's when role is leader. */
  readonly instance: string;
  readonly role: 'leader' | 'standby' | 'stopped';
  readonly token: number | null;
  /** Until the local deadline: this process stops triggering then unless a renewal succeeds first. */
  readonly expiresInMs: number | null;
  readonly acquisitions: number;
  readonly renewals: number;
  readonly renewalFailures: number;
  /** Step-downs other than a clean release. */
  readonly losses: number;
  readonly lastError: string | null;
}
