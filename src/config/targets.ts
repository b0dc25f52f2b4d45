/** The downstream targets a rollup triggers: queue, webhook, Airflow 3. */
import { IANAZone } from 'luxon';
import { z } from 'zod';
import { unsupportedDirective } from '../scheduler/targets/partition-key.js';
import { isoDuration, nonEmpty, secret, targetUrl } from './fields.js';

/** A strftime format of the directives partition keys support (partition-key.ts). */
const partitionFormat = z
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
const ianaZone = z.string().refine((zone) => IANAZone.isValidZone(zone), {
  message: 'not an IANA time zone (e.g. Europe/Berlin, UTC)',
});

const airflowTarget = z
  .strictObject({
    type: z.literal('airflow'),
    url: targetUrl,
    dag_id: nonEmpty,
    token: secret.optional(),
    username: secret.optional(),
    password: secret.optional(),
    client_id: secret.optional(),
    client_secret: secret.optional(),
    timeout: isoDuration.default(10_000),
    // No defaults: a default would change every stored airflow rollup's definition hash.
    partitioned: z.boolean().optional(),
    partition_key_format: partitionFormat.optional(),
    partition_timezone: ianaZone.optional(),
  })
  .superRefine((t, ctx) => {
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
  });

export const targetSchema = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('queue'),
    queue: nonEmpty,
    prefix: z.string().optional(),
    // No default here: a default would change every stored queue rollup's definition hash.
    timeout: isoDuration.optional(),
  }),
  z.strictObject({
    type: z.literal('webhook'),
    url: targetUrl,
    headers: z.record(z.string(), secret).default({}),
    timeout: isoDuration.default(10_000),
  }),
  airflowTarget,
]);
