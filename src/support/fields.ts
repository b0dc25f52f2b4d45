/** Field types the config schema is built from. */
import { Duration } from 'luxon';
import { z } from 'zod';
import { isValidZone } from '../core/intervals/bounds.js';

export const isoDuration = z
  .string()
  .refine((s) => Duration.fromISO(s).isValid && Duration.fromISO(s).toMillis() >= 0, {
    message: 'expected an ISO 8601 duration such as PT30S, PT5M or PT1H',
  })
  .transform((s) => Duration.fromISO(s).toMillis());

export const zone = z
  .string()
  .refine(isValidZone, { message: 'expected an IANA time zone such as UTC or Europe/Berlin' });
export const nonEmpty = z.string().trim().min(1);

/** A BullMQ queue name: BullMQ refuses `:` in one when the queue is made, long after start-up. */
export const queueName = nonEmpty.refine((name) => !name.includes(':'), {
  message: "BullMQ refuses ':' in a queue name",
});

/**
 * fetch refuses URLs with credentials, and the error it throws quotes the URL into logs, the
 * triggers table and the status page; credentials belong in headers or the airflow fields.
 */
export const targetUrl = z
  .url({ protocol: /^https?$/, error: 'expected an http:// or https:// URL' })
  .refine((u) => {
    if (!URL.canParse(u)) return true; // z.url() has already reported it
    const url = new URL(u);
    return url.username === '' && url.password === '';
  }, 'credentials in the URL are refused (they would be logged); use headers, or token/username/password for airflow');

/**
 * A credential: literal, or `{env: NAME}` read from the environment at each delivery. Literal
 * secrets are never stored in PostgreSQL (see targets/secrets.ts).
 */
export const secret = z.union(
  [
    z.string().min(1, 'must not be empty'),
    z.strictObject({
      env: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'expected an environment variable name'),
    }),
  ],
  { error: 'expected a string, or {env: NAME} to read it from the environment at delivery' },
);
export type Secret = z.output<typeof secret>;
/** A secret read from the environment when a delivery is made. */
export type EnvRef = Exclude<Secret, string>;

// Only the scheme: postgres.js also takes what WHATWG URLs do not, such as several hosts
// (postgres://db1:5432,db2:5432/app), and reports anything else it cannot parse itself.
export const postgresUrl = z
  .string()
  .regex(/^postgres(ql)?:\/\//, 'expected a postgres:// or postgresql:// URL');
