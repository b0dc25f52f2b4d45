/** The config fields both Airflow target types share: credentials and the partition key's format and zone. */
import { z } from 'zod';
import { isValidZone } from '../../core/intervals/bounds.js';
import { secret } from '../../support/fields.js';
import type { SecretKind } from '../target.js';
import { unsupportedDirective } from './partition-key.js';

/** A strftime format of the directives partition keys support (targets/airflow/partition-key.ts). */
export const partitionFormat = z
  .string()
  .min(1)
  .superRefine((format, ctx) => {
    const bad = unsupportedDirective(format);
    if (bad !== undefined)
      ctx.addIssue({
        code: 'custom',
        message: `unsupported directive ${bad}: use %Y %y %m %d %H %M %S %j %G %V %u %%`,
      });
  });

/** An IANA zone name luxon knows. */
export const ianaZone = z.string().refine(isValidZone, {
  message: 'not an IANA time zone (e.g. Europe/Berlin, UTC)',
});

/** One of token, username/password, client_id/client_secret (checkCredentials). */
export const credentialFields = {
  token: secret.optional(),
  username: secret.optional(),
  password: secret.optional(),
  client_id: secret.optional(),
  client_secret: secret.optional(),
};

/** Where the credentials go when stored: after the other fields, in this order (as they always have). */
export const credentialSecrets = {
  fields: [
    ['token', 'secret'],
    ['username', 'identity'],
    ['password', 'secret'],
    ['client_id', 'identity'],
    ['client_secret', 'secret'],
  ] as const satisfies ReadonlyArray<readonly [string, SecretKind]>,
  last: true,
};

/** Airflow's credentials: one of token, username/password, client_id/client_secret. */
export function checkCredentials(
  t: {
    token?: unknown;
    username?: unknown;
    password?: unknown;
    client_id?: unknown;
    client_secret?: unknown;
  },
  ctx: z.RefinementCtx,
): void {
  const pairs = [
    ['username', 'password'],
    ['client_id', 'client_secret'],
  ] as const;
  for (const [a, b] of pairs) {
    if ((t[a] === undefined) !== (t[b] === undefined)) {
      const missing = t[a] === undefined ? a : b;
      ctx.addIssue({ code: 'custom', path: [missing], message: `required with ${missing === a ? b : a}` });
    }
  }
  const ways = [t.token, t.username, t.client_id].filter((v) => v !== undefined).length;
  if (ways > 1) {
    ctx.addIssue({
      code: 'custom',
      path: ['token'],
      message: 'give one of token, username/password or client_id/client_secret',
    });
  }
}
