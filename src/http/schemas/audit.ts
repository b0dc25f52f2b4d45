/** `GET /v1/audit`: the writes made through the API, who made them and what changed. */
import { z } from 'zod';
import { defineOperation } from '../operation.js';
import { pageCursor, pageLimit, Timestamp } from './common.js';

export const AuditEntry = z.object({
  id: z.int(),
  at: Timestamp,
  token: z.string().meta({
    description:
      "the token's name: a name from tokens:, api:<hash> or read:<hash> for one of api_tokens or read_tokens (a short hash of it, never the token), local for this machine's commands",
  }),
  action: z
    .string()
    .meta({ description: 'trigger, retry, repair, run_report, ... (docs/http-api.md "Audit")' }),
  target_type: z.enum(['rollup', 'asset', 'run', 'config']),
  target: z.string().meta({ description: 'the rollup id, the asset, the run id (<key>~a<attempt>)' }),
  detail: z.looseObject({}).meta({ description: 'what changed; for a rollup, before and after' }),
});

export const DEFAULT_AUDIT = 100;
export const MAX_AUDIT = 1000;

export const AuditList = z.object({
  entries: z.array(AuditEntry).meta({ description: 'newest first' }),
  next_cursor: z.string().nullable().meta({ description: 'the next page (older entries); null at the end' }),
});

export const listAudit = defineOperation({
  method: 'GET',
  path: '/v1/audit',
  id: 'listAudit',
  summary: 'The writes made through the API: which token, when, what and what changed; newest first',
  description:
    'Manual triggers, retries, repairs by hand and run reports, each with the name of the token that made it. Kept as long as the history (retention.history).',
  access: 'admin',
  query: z.object({ limit: pageLimit(DEFAULT_AUDIT, MAX_AUDIT), cursor: pageCursor }),
  answers: { 200: { description: 'a page of entries', schema: AuditList } },
  errors: { 400: 'invalid_limit; invalid_cursor: a cursor this listing did not return' },
});
