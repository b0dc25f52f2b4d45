import type { Config } from '../config/index.js';

// Re-exported: the rule is pure and lives in core so the config schema can use it without a circle.
export { hasHashTag } from '../core/connections/hash-tag.js';

/** One queue group: the events queue and its dead letters under one hash-tagged prefix. */
export interface QueueGroup {
  readonly index: number;
  readonly prefix: string;
  readonly name: string;
  readonly deadLetter: string;
}

/**
 * With one group (the default) the queue is exactly `queue.name` under `queue.prefix`. With N > 1,
 * group i lives under the prefix `{<queue.prefix>-<i>}`: the braces are a Redis Cluster hash tag,
 * so each group's keys share one slot (as BullMQ's scripts need) and different groups spread over
 * the shards. Queue and dead-letter names stay the same in every group.
 */
export function groupPrefix(queue: Config['queue'], index: number): string {
  return queue.groups === 1 ? queue.prefix : `{${queue.prefix}-${index}}`;
}

export function queueGroups(queue: Config['queue']): QueueGroup[] {
  return Array.from({ length: queue.groups }, (_, index) => ({
    index,
    prefix: groupPrefix(queue, index),
    name: queue.name,
    deadLetter: queue.dead_letter,
  }));
}

/** The groups this instance consumes: `queue.consume`, else all. */
export function consumedGroups(queue: Config['queue']): QueueGroup[] {
  const all = queueGroups(queue);
  return queue.consume === undefined ? all : queue.consume.map((i) => all[i]!);
}
