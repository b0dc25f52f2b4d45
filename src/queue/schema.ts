/**
 * On the PostgreSQL queue backend a queue prefix names the schema its queues live in: BullMQ's
 * `schema` option is PostgreSQL's counterpart of Redis' key prefix (BullMQ ignores `prefix` there).
 */

import type { Config } from '../config/index.js';
import { fnv1a32 } from '../core/events/routing.js';
import { consumedGroups } from './groups.js';

/** BullMQ accepts plain identifiers only (letters, digits, underscores; at most 63 characters). */
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/**
 * A prefix that is already a plain identifier is the schema itself (`bull` is schema `bull`).
 * Any other (`{coverage-rollup-0}`, a group's hash-tagged prefix) is spelled as one: each other
 * character becomes `_`, and a hash of the original keeps two prefixes that spell alike apart.
 */
export function queueSchema(prefix: string): string {
  if (IDENTIFIER.test(prefix)) return prefix;
  const spelled = prefix.replace(/[^A-Za-z0-9_]/g, '_').replace(/^(?=[0-9])/, '_');
  return `${spelled.slice(0, 54)}_${fnv1a32(prefix).toString(16).padStart(8, '0')}`;
}

/**
 * The schemas of the queues this instance consumes on the PostgreSQL backend, for its table
 * maintenance: each consumed group's events and dead-letter queues share the group's prefix, so
 * one schema each. None on Redis.
 */
export function consumedQueueSchemas(config: Pick<Config, 'queue'>): string[] {
  if (config.queue.backend !== 'postgres') return [];
  return [...new Set(consumedGroups(config.queue).map((g) => queueSchema(g.prefix)))];
}
