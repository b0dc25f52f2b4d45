import { randomBytes } from 'node:crypto';

/**
 * This process's instance id: in its scheduler lease holder id (`host:pid:random@instance`) and in the
 * `application_name` of every session it opens (`coverage-rollup-ingest@1f2e3d4c`), so a new lease
 * holder can tell, in pg_stat_activity, which sessions belong to the instance it took over from
 * (src/lease/former-holder.ts), and an operator can tell which instance a session belongs to.
 */
export const INSTANCE_ID = randomBytes(4).toString('hex');

/** The prefix of the daemon's own session names; connect() tags those with the instance id. */
export const SESSION_PREFIX = 'coverage-rollup';

/** PostgreSQL keeps NAMEDATALEN - 1 bytes of an application_name. */
const MAX_APPLICATION_NAME = 63;

/** `base@instance`, the base shortened should the whole be longer than PostgreSQL keeps. */
export function sessionName(base: string, instance: string = INSTANCE_ID): string {
  const suffix = `@${instance}`;
  return `${base.slice(0, Math.max(0, MAX_APPLICATION_NAME - suffix.length))}${suffix}`;
}

/** The instance id in a lease holder id (`host:pid:random@instance`): all of it without an `@`. */
export function instanceOfHolder(holder: string): string {
  return holder.slice(holder.lastIndexOf('@') + 1);
}
