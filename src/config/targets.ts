/** The downstream targets a rollup triggers: queue, webhook, Airflow 3 (dag runs and asset events), Dagster. */
import { z } from 'zod';
import { isValidZone } from '../core/bounds.js';
import { unsupportedDirective } from '../core/partition-key.js';
import { isoDuration, nonEmpty, queueName, secret, targetUrl } from './fields.js';

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
const ianaZone = z.string().refine(isValidZone, {
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
  .superRefine(checkCredentials);

/**
 * A Dagster asset key: Dagster's user string (`/` separates the parts: `warehouse/orders_hourly`)
 * or the list of its parts. Stored and used as the list.
 */
const dagsterAssetKey = z
  .union([z.string(), z.array(z.string())], {
    error: 'expected a string such as warehouse/orders or a list of key parts',
  })
  .transform((key) => (typeof key === 'string' ? key.split('/') : key))
  .refine((parts) => parts.length > 0 && parts.every((p) => p.trim() !== '' && p === p.trim()), {
    message: 'expected non-empty key parts without surrounding spaces, such as warehouse/orders',
  });

/** `POST /report_asset_materialization/{asset_key}` of a Dagster webserver. */
const dagsterTarget = z.strictObject({
  type: z.literal('dagster'),
  /** The webserver (`http://dagster:3000`), or a Dagster+ deployment (`https://org.dagster.cloud/prod`). */
  url: targetUrl,
  asset_key: dagsterAssetKey,
  /**
   * The partition key as a luxon format of the period start in the rollup's zone, to match the
   * asset's partitions definition (Dagster's hourly keys are `yyyy-MM-dd-HH:mm`); default: the
   * period key (`2025-06-01` for a day, as Dagster's daily keys).
   */
  partition_format: nonEmpty.optional(),
  /** A Dagster+ user token, sent as `Dagster-Cloud-Api-Token`; open source Dagster needs none. */
  token: secret.optional(),
  headers: z.record(z.string(), secret).default({}),
  timeout: isoDuration.default(10_000),
});

/** Airflow's credentials: one of token, username/password, client_id/client_secret. */
function checkCredentials(
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

/**
 * `airflow_asset`: decisions as partitioned asset events. `partition_timezone` defaults
 * to the rollup's zone (filled in by the rollup schema).
 */
const airflowAssetTarget = z
  .strictObject({
    type: z.literal('airflow_asset'),
    url: targetUrl,
    asset: nonEmpty.optional(),
    asset_uri: nonEmpty.optional(),
    token: secret.optional(),
    username: secret.optional(),
    password: secret.optional(),
    client_id: secret.optional(),
    client_secret: secret.optional(),
    timeout: isoDuration.default(10_000),
    partition_key_format: partitionFormat.default('%Y-%m-%dT%H:%M:%S'),
    partition_timezone: ianaZone.optional(),
    follow_dag_id: nonEmpty.optional(),
  })
  .superRefine((t, ctx) => {
    if ((t.asset === undefined) === (t.asset_uri === undefined))
      ctx.addIssue({
        code: 'custom',
        path: ['asset'],
        message: "give the asset's name (asset) or its URI (asset_uri), one of them",
      });
    checkCredentials(t, ctx);
  });

export const targetSchema = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('queue'),
    queue: queueName,
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
  dagsterTarget,
  airflowAssetTarget,
]);
