/** `POST /v1/events` and `POST /v1/assets/{asset}/replay-requirements`. */
import { z } from 'zod';
import { defineOperation } from '../operation.js';
import { AssetParams } from './assets.js';
import { coded, ErrorBody } from './common.js';
import { EVENT_SCHEMA, REPLAY_BODY_SCHEMA } from './event-spellings.js';

export const MAX_EVENTS_PER_REQUEST = 1000;

/**
 * An event is checked by the normaliser the queue worker uses (src/core/events/events.ts), which takes
 * many spellings and names each refusal's reason, so the request schema lets any JSON through and
 * the item is refused per index, as the worker would refuse it. The document describes the
 * language the normaliser accepts (./event-spellings.ts), so generated clients can send every
 * spelling and a request the document refuses is refused.
 */
export const EventItem = z.unknown().meta(EVENT_SCHEMA);

const payload = `send an event object or an array of 1 to ${MAX_EVENTS_PER_REQUEST} of them`;

export const EventsBody = coded(
  z.union([
    z.array(EventItem).min(1).max(MAX_EVENTS_PER_REQUEST),
    EventItem.refine((item) => item !== null && item !== undefined && !Array.isArray(item)),
  ]),
  'invalid_payload',
  payload,
);

export const Accepted = z.object({
  accepted: z.int(),
  ids: z.array(z.string().nullable()).meta({ description: 'the queue job ids, in item order' }),
});

/** Per item, what the index did with it: the value a queue job completes with. */
const IngestResult = z.discriminatedUnion('status', [
  z.object({
    status: z.literal('committed'),
    asset: z.string(),
    seq: z.int().meta({ description: "the event's position in the asset's ingest order" }),
  }),
  z.object({
    status: z.literal('duplicate').meta({ description: 'an event of the same key was ingested before' }),
    asset: z.string(),
  }),
]);

export const Committed = z.object({
  accepted: z.int(),
  ids: z.array(z.null()).meta({ description: 'no queue job: null per item, in item order' }),
  results: z.array(IngestResult).meta({ description: 'in item order' }),
});

const answers = (what: string) => ({
  200: {
    description: `${what} committed to the index before this answer (queue.backend: postgres, where the queue and the index share one PostgreSQL): the next coverage answer includes it`,
    schema: Committed,
  },
  202: { description: `${what} enqueued (queue.backend: redis)`, schema: Accepted },
});

/** `invalid_events`: nothing was enqueued or committed; `errors` says why per item. */
export const InvalidEvents = ErrorBody.extend({
  errors: z
    .array(
      z.object({
        index: z.int().meta({ description: 'position in the request (0 for a single event)' }),
        reason: z.string().meta({ description: 'a dead-letter reason (docs/events.md)' }),
        message: z.string(),
      }),
    )
    .optional(),
});

export const postEvents = defineOperation({
  method: 'POST',
  path: '/v1/events',
  id: 'postEvents',
  summary:
    'Ingest events (committed at once where the queue is in PostgreSQL, else enqueued), validated first as the worker validates them',
  // Every event's asset must be the token's: one that is not refuses the whole batch (403).
  access: 'events',
  body: { description: 'one event or an array of them', schema: EventsBody },
  answers: answers('every event was'),
  errorBody: InvalidEvents,
  errors: {
    400: `invalid_payload: ${payload}; invalid_events: some event is invalid (see errors), none was enqueued or committed; invalid_json: a body that is not UTF-8 JSON`,
    503: 'database_unavailable (queue.backend: postgres): PostgreSQL did not answer the commit; send the batch again',
  },
});

export const ReplayRequirementBody = coded(
  // Documented, not enforced here beyond "an object": the normaliser refuses a bad field per
  // field (invalid_events).
  z.looseObject({}).meta(REPLAY_BODY_SCHEMA),
  'invalid_payload',
  'send {"start": ..., "end": ..., "version": ...}',
);

export const postReplayRequirement = defineOperation({
  method: 'POST',
  path: '/v1/assets/{asset}/replay-requirements',
  id: 'postReplayRequirement',
  tag: 'events',
  summary:
    'Ingest a replay requirement for an asset (committed at once where the queue is in PostgreSQL, else enqueued)',
  access: 'events',
  scopedBy: 'asset',
  params: AssetParams,
  body: { description: '{start, end, version}', schema: ReplayRequirementBody },
  answers: answers('the requirement was'),
  errorBody: InvalidEvents,
  errors: {
    400: 'invalid_payload: a body that is not an object; invalid_events: an invalid requirement (see errors); invalid_json',
    414: 'fst_err_max_param_length: an asset name longer than any the worker accepts',
    503: 'database_unavailable (queue.backend: postgres): PostgreSQL did not answer the commit; send it again',
  },
});
