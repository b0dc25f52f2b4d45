/** Rollups as resources (PUT, GET its definition, DELETE) and the reload of the config file. */
import { z } from 'zod';
import { defineOperation } from '../operation.js';
import { coded, ErrorBody, Timestamp } from './common.js';
import { RollupParams, RollupSource } from './rollups.js';

/** A refusal with every problem found, each naming its field as config errors do. */
export const InvalidRollup = ErrorBody.extend({
  errors: z
    .array(z.string())
    .optional()
    .meta({ description: 'every problem, one per line: `rollups[<id>].<field>: <what is wrong>`' }),
});

const DryRunQuery = z.object({
  dry_run: coded(
    z
      .enum(['true', 'false', '1', '0'])
      .optional()
      .meta({ description: 'true or 1: check the rollup and answer what would change, changing nothing' }),
    'invalid_dry_run',
    'dry_run must be true, false, 1 or 0',
  ),
});

const RollupBody = z.record(z.string(), z.unknown()).meta({
  description:
    'one rollup as an entry of the config file\'s `rollups:` spells it, as JSON (docs/rollups.md); `id` may be left out, and must match the path when given. Secrets in its target are given as {"env": "NAME"}.',
  examples: [
    {
      upstream: ['warehouse.orders'],
      every: 'day',
      timezone: 'Europe/Berlin',
      begin: '2025-06-01',
      policy: { ratio: 1, settle: 'PT1M' },
      target: { type: 'queue', queue: 'downstream-runs' },
    },
  ],
});

export const RollupWritten = z.object({
  id: z.string(),
  source: z.literal('api'),
  dry_run: z.boolean(),
  change: z.enum(['added', 'changed', 'unchanged']),
  periods: z.object({
    action: z.enum(['created', 'rebuilt', 'reevaluated', 'none']).meta({
      description:
        'created: a new rollup, its periods from begin; rebuilt: a new calendar, its untriggered periods rebuilt on it; reevaluated: its untriggered periods evaluated again; none: unchanged',
    }),
    untriggered: z
      .int()
      .meta({ description: 'stored periods not yet triggered that are rebuilt or re-evaluated' }),
  }),
  target: z.object({ type: z.string(), changed: z.boolean() }),
  written_by: z.string().nullable().meta({ description: 'who wrote it (null under dry_run or unchanged)' }),
  written_at: Timestamp.nullable(),
});

export const RollupDefinition = z.object({
  id: z.string(),
  source: RollupSource,
  definition: z.record(z.string(), z.unknown()).meta({
    description:
      'as written (the file\'s entry, or the body of the PUT); literal secrets shown as {"redacted": true}',
  }),
  written_by: z.string().nullable().meta({ description: 'for an API rollup: who wrote it' }),
  written_at: Timestamp.nullable(),
});

export const RollupDeleted = z.object({ id: z.string(), deleted: z.literal(true) });

export const Reloaded = z.object({
  rollups: z.object({
    added: z.array(z.string()),
    changed: z.array(z.string()),
    removed: z.array(z.string()),
    unchanged: z.int(),
  }),
  restart_required: z.array(z.string()).meta({
    description:
      'settings of the file besides rollups that differ from the running ones: they take effect at the next start',
  }),
});

const inFile =
  'rollup_in_config_file: the rollup is defined in the config file, which the API does not overwrite or delete';

export const putRollup = defineOperation({
  method: 'PUT',
  path: '/v1/rollups/{id}',
  id: 'putRollup',
  summary: 'Add or replace a rollup through the API (stored in PostgreSQL, checked with every other rollup)',
  description:
    'Takes effect within one scheduler pass, on every instance; `dry_run` answers what would change without changing it.',
  access: 'rollups',
  scopedBy: 'id',
  params: RollupParams,
  query: DryRunQuery,
  body: { description: 'one rollup, as the config file spells it', schema: RollupBody },
  answers: { 200: { description: 'what was changed (or, under dry_run, would be)', schema: RollupWritten } },
  errors: {
    400: 'invalid_request: the body is no JSON object, or names another id',
    409: inFile,
    422: 'invalid_rollup: the rollup is refused; `errors` lists every problem',
  },
  errorBody: InvalidRollup,
});

export const getRollupDefinition = defineOperation({
  method: 'GET',
  path: '/v1/rollups/{id}/definition',
  id: 'getRollupDefinition',
  summary: 'A rollup as written, with where it is defined (file or api) and, for the API, who wrote it when',
  access: 'read',
  params: RollupParams,
  answers: { 200: { description: 'the definition', schema: RollupDefinition } },
  errors: { 404: 'unknown_rollup: no rollup with this id is configured' },
});

export const deleteRollup = defineOperation({
  method: 'DELETE',
  path: '/v1/rollups/{id}',
  id: 'deleteRollup',
  summary: 'Delete a rollup written through the API: it never triggers or delivers again; its history stays',
  access: 'rollups',
  scopedBy: 'id',
  params: RollupParams,
  answers: { 200: { description: 'deleted', schema: RollupDeleted } },
  errors: {
    404: 'unknown_rollup: no rollup with this id was written through the API',
    409: inFile,
    422: 'invalid_rollup: other rollups need this one; `errors` lists every problem',
  },
  errorBody: InvalidRollup,
});

export const reloadConfig = defineOperation({
  method: 'POST',
  path: '/v1/admin/reload',
  id: 'reloadConfig',
  summary:
    "Read the config file's rollups again: added, changed and removed ones take effect within one pass",
  description:
    'Checked first: a bad file changes nothing and answers every problem. Every other instance reads its own file again too. Settings besides rollups need a restart (restart_required).',
  access: 'admin',
  answers: { 200: { description: 'what changed', schema: Reloaded } },
  errors: {
    409: 'no_config_file: the daemon was started without a config file',
    422: 'invalid_configuration: nothing changed; `errors` lists every problem',
  },
  errorBody: InvalidRollup,
});
