/** Probes, metrics and this description itself: public, outside /v1. */
import { z } from 'zod';
import { defineOperation } from '../operation.js';

export const healthz = defineOperation({
  method: 'GET',
  path: '/healthz',
  id: 'healthz',
  summary: 'Liveness: answers while the process is alive',
  description: 'Reads nothing: a liveness probe that restarts the process only when it stops answering.',
  access: 'public',
  answers: { 200: { description: 'alive', schema: z.object({ status: z.literal('ok') }) } },
  errors: {},
});

/** Open: checks are added as the daemon grows (scheduler, retention, ...), and clients should ignore unknown ones. */
export const Readiness = z.looseObject({
  status: z.enum(['ready', 'not_ready']),
  postgres: z.string().optional().meta({ description: 'ok, or error: why' }),
  migrations: z.object({ applied: z.int(), expected: z.int(), current: z.boolean() }).optional(),
  redis: z.string().optional().meta({ description: 'ok, or error: why' }),
  scheduler: z
    .looseObject({})
    .optional()
    .meta({ description: "when rollups are scheduled: this instance's role, instance id and lease" }),
  retention: z.looseObject({}).optional().meta({ description: 'the last retention pass' }),
  maintenance: z
    .looseObject({
      autovacuum: z.enum(['on', 'off', 'unknown']),
      tables_without_autovacuum: z.array(z.string()),
      daemon_maintains: z.boolean().nullable(),
      queue_schemas: z.array(z.string()),
    })
    .optional()
    .meta({
      description:
        "whether autovacuum runs for this database (and which of the daemon's tables it skips); where it does not, the daemon analyzes and vacuums its own tables after large changes, and on the PostgreSQL queue backend those of the queue schemas it consumes (`queue_schemas`)",
    }),
});

export const readyz = defineOperation({
  method: 'GET',
  path: '/readyz',
  id: 'readyz',
  summary: 'Readiness: PostgreSQL and Redis answer (each within 2 s) and migrations are current',
  description:
    'For a load balancer or orchestrator: 503 while a dependency does not answer or the schema is behind; the body says which check fails, with the scheduler lease, retention and table maintenance. With read_tokens or tokens set, that detail is given only to a read token (or to anyone with metrics.public: true); without one the answer is the status alone.',
  access: 'public',
  answers: {
    200: { description: 'ready', schema: Readiness },
    503: { description: 'not ready; the failing check says why', schema: Readiness },
  },
  errors: {},
});

export const metrics = defineOperation({
  method: 'GET',
  path: '/metrics',
  id: 'metrics',
  summary: 'Prometheus metrics',
  description:
    'Counters, gauges and histograms of ingest, scheduling, deliveries and runs (docs/operations.md "Metrics"); gauges read from PostgreSQL wait at most 2 s and keep their last values. With read_tokens or tokens set, it needs a read token unless metrics.public is true (its labels name every asset and rollup).',
  access: 'metrics',
  answers: {
    200: {
      description: 'the Prometheus text exposition format',
      schema: z.string(),
      contentType: 'text/plain',
    },
  },
  errors: {},
});

export const openapi = defineOperation({
  method: 'GET',
  path: '/openapi.json',
  id: 'openapi',
  summary: 'This description (OpenAPI 3.1)',
  description:
    'Generated at start from the schemas the routes validate with, so it cannot drift from the code.',
  access: 'public',
  answers: {
    200: { description: 'the OpenAPI document', schema: z.looseObject({ openapi: z.literal('3.1.0') }) },
  },
  errors: {},
});
