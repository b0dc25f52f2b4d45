/**
 * The OpenAPI 3.1 description served at `/openapi.json`, generated from the operations the routes
 * are registered from, so it cannot drift from them. Answers become named components; parameters
 * and bodies are described as the request schemas take them (zod's `io: 'input'`).
 */
import { z } from 'zod';
import { type Operation, tagOf } from './operation.js';
import { Asset, AssetList, Batch, CoverageAnswer } from './schemas/assets.js';
import {
  Bound,
  ErrorBody,
  HeadersTooLarge,
  NO_NUL,
  ReplayRequiredRange,
  Span,
  Timestamp,
} from './schemas/common.js';
import { Accepted, InvalidEvents } from './schemas/events.js';
import { Readiness } from './schemas/health.js';
import {
  PeriodDetail,
  PeriodJson,
  PeriodListing,
  Policy,
  RollupList,
  RollupSummary,
  StateCounts,
  TriggerRequested,
} from './schemas/rollups.js';
import { HEADERS_TIMEOUT_MS, REQUEST_TIMEOUT_MS } from './timeouts.js';

type Json = Record<string, unknown>;

/** Schemas that get a name in `components.schemas`; any other answer is named after its operation. */
const NAMED = {
  Bound,
  Timestamp,
  Span,
  ReplayRequiredRange,
  ErrorBody,
  Asset,
  AssetList,
  Batch,
  CoverageAnswer,
  Accepted,
  InvalidEvents,
  StateCounts,
  Policy,
  RollupSummary,
  RollupList,
  PeriodJson,
  PeriodListing,
  PeriodDetail,
  TriggerRequested,
  Readiness,
  HeadersTooLarge,
};

const READ_ERRORS = {
  401: 'unauthorized: read_tokens or tokens is set and no bearer token was sent',
  403: 'forbidden: the token is not one the daemon knows, or lacks scope read',
};

/** The refusals of a write: `writes_disabled`, or `forbidden` naming the scope (and name) it lacks. */
const writeErrors = (scope: string, names: string) => ({
  401: 'unauthorized: no bearer token',
  403: `writes_disabled: no token may write; forbidden: the token is not one the daemon knows, or lacks scope ${scope}${names} (the answer names the scope in \`scope\`${names ? ', and the name' : ''})`,
});

const ACCESS_ERRORS = {
  public: {},
  read: READ_ERRORS,
  metrics: {
    401: 'unauthorized: read_tokens or tokens is set, metrics.public is not, and no bearer token was sent',
    403: READ_ERRORS[403],
  },
  events: writeErrors('events', ', or an asset it writes is outside its assets patterns'),
  rollups: writeErrors('rollups', ', or the rollup is outside its rollups patterns'),
  admin: {
    401: 'unauthorized: a token is configured and no bearer token was sent',
    403: 'forbidden: the token is not one the daemon knows, or lacks scope admin',
  },
} as const;

const BODY_ERRORS = {
  413: 'fst_err_ctp_body_too_large: a body over http.body_limit',
  415: 'fst_err_ctp_invalid_media_type: a body of a media type the server does not read (send application/json)',
};

/** What each group holds; a group without a line here (a new route's) is still listed. */
const TAG_DESCRIPTIONS: Record<string, string> = {
  assets: 'coverage of one asset, and every asset with its freshness',
  events: 'producing events over HTTP, as the queue takes them',
  rollups: 'rollups, their periods, and manual triggers',
  runs: 'downstream runs and their outcomes',
  graph: 'how assets and rollups feed each other',
  audit: 'the writes made through the API, and the tokens that made them',
  operations: 'liveness, readiness, metrics and this description',
};

const BEARER = [{ bearerAuth: [] }];
/** `{}` is "no credentials": reads are open unless read_tokens or tokens is set. */
const OPTIONAL_BEARER = [{}, { bearerAuth: [] }];

function securityOf(op: Operation) {
  switch (op.access) {
    case 'public':
      return [];
    case 'read':
    case 'metrics':
      return OPTIONAL_BEARER;
    case 'admin':
      // An admin read (the audit) is open, as reads are, where no token is configured at all.
      return op.method === 'GET' ? OPTIONAL_BEARER : BEARER;
    default:
      return BEARER;
  }
}

export function openApiDocument(operations: readonly Operation[], version: string): Json {
  const components = componentSchemas(operations);
  const paths: Record<string, Record<string, Json>> = {};
  for (const op of operations) {
    paths[op.path] ??= {};
    paths[op.path]![op.method.toLowerCase()] = operationObject(op, components.nameOf);
  }
  const tags = [...new Set(operations.map(tagOf))].map((name) => ({
    name,
    ...(TAG_DESCRIPTIONS[name] ? { description: TAG_DESCRIPTIONS[name] } : {}),
  }));
  return {
    openapi: '3.1.0',
    info: {
      title: 'coverage-rollup',
      version,
      description: [
        'Coverage of streaming interval events, rollup periods and their triggers. Field names are a public contract, described in docs/http-api.md of the project.',
        `Rules every operation follows: a request body is JSON in UTF-8 sent as application/json (any other type is refused with 415, bytes that are not UTF-8 with 400 invalid_json; an empty body of any type is no body). An optional query parameter sent empty is the same as absent. No parameter may hold U+0000 (400). A method a path does not take answers 405 with an Allow header. The request line and headers must arrive within ${HEADERS_TIMEOUT_MS / 1000} s of connecting, the whole request within ${REQUEST_TIMEOUT_MS / 1000} s (408).`,
      ].join('\n\n'),
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    servers: [{ url: '/' }],
    tags,
    paths,
    components: {
      schemas: components.schemas,
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          description:
            'a token from api_tokens (API_TOKENS) for anything; from read_tokens or api_tokens for reads where read_tokens or tokens is set; a token of tokens for what its scopes (read, events, rollups, admin) and name patterns allow',
        },
      },
    },
  };
}

/** One registry of every answer's schema, so shared shapes become `$ref`s between components. */
function componentSchemas(operations: readonly Operation[]) {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(NAMED)) registry.add(schema, { id });
  const add = (schema: z.ZodType, id: string) => {
    if (!registry.has(schema)) registry.add(schema, { id });
  };
  for (const op of operations) {
    for (const [status, answer] of Object.entries(op.answers))
      add(answer.schema, `${pascal(op.id)}${status}`);
    if (op.errorBody) add(op.errorBody, `${pascal(op.id)}Error`);
  }
  const { schemas } = z.toJSONSchema(registry, {
    target: 'draft-2020-12',
    io: 'output',
    uri: (id) => `#/components/schemas/${id}`,
  });
  // Components are addressed by their place in the document; zod's `$id`s would be fragments.
  for (const schema of Object.values(schemas)) {
    delete schema.$schema;
    delete schema.$id;
  }
  const nameOf = (schema: z.ZodType) => {
    const id = registry.get(schema)?.id;
    if (id === undefined) throw new Error('openapi: an answer schema has no component');
    return { $ref: `#/components/schemas/${id}` };
  };
  return { schemas, nameOf };
}

function operationObject(op: Operation, ref: (schema: z.ZodType) => Json): Json {
  const responses: Record<string, Json> = {};
  for (const [status, answer] of Object.entries(op.answers)) {
    responses[status] = {
      description: answer.description,
      content: { [answer.contentType ?? 'application/json']: { schema: ref(answer.schema) } },
    };
  }
  const bodyErrors: Record<number, string> = op.body ? BODY_ERRORS : {};
  const errors: Record<number, string> = {
    ...bodyErrors,
    ...op.errors,
    ...ACCESS_ERRORS[op.access],
    500: 'internal_error: see the daemon log',
  };
  for (const [status, description] of Object.entries(errors)) {
    responses[status] = {
      description,
      content: { 'application/json': { schema: ref(op.errorBody ?? ErrorBody) } },
    };
  }
  responses[431] = {
    description: "a request line and headers over 16 KB (Node's limit), refused before any route",
    content: { 'application/json': { schema: ref(HeadersTooLarge) } },
  };
  return {
    operationId: op.id,
    tags: [tagOf(op)],
    summary: op.summary,
    ...(op.description ? { description: op.description } : {}),
    security: securityOf(op),
    parameters: [...parameters(op.params, 'path'), ...parameters(op.query, 'query')],
    ...(op.body
      ? {
          requestBody: {
            required: true,
            description: op.body.description,
            content: { 'application/json': { schema: inputSchema(op.body.schema) } },
          },
        }
      : {}),
    responses,
  };
}

function parameters(schema: z.ZodObject | undefined, where: 'path' | 'query'): Json[] {
  if (!schema) return [];
  const object = inputSchema(schema) as { properties: Record<string, Json>; required?: string[] };
  return Object.entries(object.properties).map(([name, { description, ...rest }]) => {
    const required = where === 'path' || (object.required ?? []).includes(name);
    // An optional query parameter sent empty (`?state=`) counts as not given (./route.ts).
    const emptyIsAbsent = where === 'query' && !required;
    const said = [description, emptyIsAbsent ? 'empty is the same as absent' : undefined].filter(Boolean);
    // No parameter may hold U+0000 (./route.ts); a pattern of its own already says more.
    const schema = rest.type === 'string' && rest.pattern === undefined ? { ...rest, pattern: NO_NUL } : rest;
    return {
      name,
      in: where,
      required,
      ...(said.length === 0 ? {} : { description: said.join('; ') }),
      ...(emptyIsAbsent ? { allowEmptyValue: true } : {}),
      schema,
    };
  });
}

function inputSchema(schema: z.ZodType): Json {
  const { $schema: _, ...json } = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input' });
  return json;
}

const pascal = (id: string) => id[0]!.toUpperCase() + id.slice(1);
