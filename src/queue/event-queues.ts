import type { Job, JobType, Queue } from 'bullmq';
import type { Config } from '../config/index.js';
import { BadInputError } from '../core/errors.js';
import { assetOf } from '../core/events/events.js';
import { groupOf } from '../core/events/routing.js';
import { groupBy } from '../core/group-by.js';
import type { QueueConnection } from './backend.js';
import { queueGroups } from './groups.js';

/**
 * The producer side of the events queue: every group's queue, and each event added to the group
 * of its asset (core/events/routing.ts), so emit, POST /v1/events and the examples route alike.
 */
export class EventQueues {
  readonly queues: readonly Queue[];

  constructor(connection: QueueConnection, queue: Config['queue']) {
    this.queues = queueGroups(queue).map((g) => connection.queue(g.name, g.prefix));
  }

  on(event: 'error', listener: (error: Error) => void): void {
    for (const q of this.queues) q.on(event, listener);
  }

  /** Adds the events, each on its asset's group; the jobs come back in the order of `items`. */
  async addBulk(items: readonly unknown[]): Promise<Job[]> {
    const byGroup = groupBy(items.keys(), (i) => this.groupOfEvent(items[i]));
    const jobs: Job[] = new Array(items.length);
    await Promise.all(
      [...byGroup].map(async ([group, indexes]) => {
        const added = await this.queues[group]!.addBulk(
          indexes.map((i) => ({ name: 'event', data: items[i] })),
        );
        added.forEach((job, k) => {
          jobs[indexes[k]!] = job;
        });
      }),
    );
    return jobs;
  }

  /** Job counts summed over every group. */
  async getJobCounts(...states: JobType[]): Promise<Record<string, number>> {
    const counts = await Promise.all(this.queues.map((q) => q.getJobCounts(...states)));
    const total: Record<string, number> = {};
    for (const c of counts)
      for (const [state, n] of Object.entries(c)) total[state] = (total[state] ?? 0) + n;
    return total;
  }

  async close(): Promise<void> {
    await Promise.all(this.queues.map((q) => q.close()));
  }

  /**
   * Producers validate before they add, so the name is there; an event without one (a producer that
   * skipped validation) goes to group 0, whose worker dead-letters it.
   */
  private groupOfEvent(data: unknown): number {
    if (this.queues.length === 1 || data === null || typeof data !== 'object') return 0;
    try {
      return groupOf(assetOf(data as Record<string, unknown>), this.queues.length);
    } catch (error) {
      if (error instanceof BadInputError) return 0;
      throw error;
    }
  }
}
