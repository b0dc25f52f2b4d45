/** The OpenAPI document as generated, without a daemon: its structure and the rules it states. */
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseConfig } from '../../../src/config/index.js';
import { normalizeEvent } from '../../../src/core/events/events.js';
import type { HttpContext } from '../../../src/http/context.js';
import { openApiDocument } from '../../../src/http/openapi.js';
import { OPERATIONS } from '../../../src/http/operations.js';
import { CoverageQuery } from '../../../src/http/schemas/assets.js';
import { EVENT_SCHEMA, EVENT_SPELLINGS } from '../../../src/http/schemas/event-spellings.js';
import { EventItem, ReplayRequirementBody } from '../../../src/http/schemas/events.js';
import { buildServer } from '../../../src/http/server.js';
import { createLogger } from '../../../src/support/log.js';
import { packageVersion } from '../../../src/support/paths.js';
import { answerChecker, unresolvedRefs } from '../../helpers/openapi.js';

// biome-ignore lint/suspicious/noExplicitAny: the document is read as untyped JSON
type Json = Record<string, any>;
const document = openApiDocument(OPERATIONS, packageVersion()) as Json;
const operations = Object.entries(document.paths as Json).flatMap(([path, item]) =>
  Object.entries(item as Json).map(([method, op]) => ({ path, method, op: op as Json })),
);

describe('the OpenAPI document', () => {
  it('is OpenAPI 3.1 with the package version and relative servers', () => {
    expect(document.openapi).toBe('3.1.0');
    expect(document.info).toMatchObject({ title: 'coverage-rollup', version: packageVersion() });
    expect(document.servers).toEqual([{ url: '/' }]);
  });

  it('describes every operation once, each with a success answer and its errors', () => {
    expect(operations.map(({ method, path }) => `${method.toUpperCase()} ${path}`).sort()).toEqual(
      OPERATIONS.map((op) => `${op.method} ${op.path}`).sort(),
    );
    expect(new Set(operations.map(({ op }) => op.operationId)).size).toBe(operations.length);
    for (const { path, op } of operations) {
      const statuses = Object.keys(op.responses).map(Number);
      expect(
        statuses.some((s) => s >= 200 && s < 300),
        path,
      ).toBe(true);
      expect(statuses, path).toContain(500);
      // Probes included: what linters ask of every operation (a 4XX answer), and it is real.
      expect(statuses, path).toContain(431);
      const inPath = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      const declared = (op.parameters as Json[]).filter((p) => p.in === 'path');
      expect(
        declared.map((p) => p.name),
        path,
      ).toEqual(inPath);
      expect(declared.every((p) => p.required)).toBe(true);
    }
  });

  it('states the access rules the code enforces', () => {
    const security = (method: string, path: string) => document.paths[path][method].security;
    expect(security('post', '/v1/events')).toEqual([{ bearerAuth: [] }]);
    expect(security('get', '/v1/assets')).toEqual([{}, { bearerAuth: [] }]);
    expect(security('get', '/healthz')).toEqual([]);
    // Behind the read gate unless metrics.public; the audit open only where no token is configured.
    expect(security('get', '/metrics')).toEqual([{}, { bearerAuth: [] }]);
    expect(security('get', '/v1/audit')).toEqual([{}, { bearerAuth: [] }]);
    expect(security('post', '/v1/rollups/{id}/periods/{start}/trigger')).toEqual([{ bearerAuth: [] }]);
    const forbidden = (method: string, path: string) =>
      document.paths[path][method].responses['403'].description as string;
    expect(forbidden('post', '/v1/events')).toMatch(/lacks scope events, or an asset/);
    expect(forbidden('post', '/v1/runs')).toMatch(/lacks scope rollups, or the rollup/);
    expect(forbidden('get', '/v1/audit')).toMatch(/lacks scope admin/);
    expect(forbidden('get', '/metrics')).toMatch(/lacks scope read/);
    // Every write to one rollup is checked against the token's rollup patterns by its id, and
    // every write to one asset by its name, whoever adds the route.
    for (const op of OPERATIONS.filter((o) => o.method !== 'GET')) {
      if (op.path.startsWith('/v1/rollups/{id}'))
        expect(op, op.id).toMatchObject({ access: 'rollups', scopedBy: 'id' });
      if (op.path.startsWith('/v1/assets/{asset}'))
        expect(op, op.id).toMatchObject({ access: 'events', scopedBy: 'asset' });
    }
    expect(document.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(Object.keys(document.paths['/v1/events'].post.responses)).toEqual(
      expect.arrayContaining(['401', '403', '413', '415']),
    );
  });

  it('resolves every $ref, and a dangling one is found', () => {
    expect(unresolvedRefs(document)).toEqual([]);
    expect(unresolvedRefs({ ...document, x: { $ref: '#/components/schemas/Nope' } })).toEqual([
      '#/components/schemas/Nope',
    ]);
  });

  it('has answer schemas a strict 2020-12 validator compiles, and that refuse a wrong body', () => {
    const check = answerChecker(document);
    for (const { path, method, op } of operations) {
      for (const [status, answer] of Object.entries(op.responses as Json)) {
        for (const contentType of Object.keys(answer.content)) {
          expect(() => check(method, path, Number(status), null, contentType)).not.toThrow();
        }
      }
    }
    const healthy = (body: unknown) => check('GET', '/healthz', 200, body).errors;
    expect(healthy({ status: 'ok' })).toBeNull();
    expect(healthy({ status: 'fine' })).toMatch(/constant/);
    expect(healthy({ status: 'ok', extra: 1 })).toMatch(/additional properties/);
  });

  it('documents query integers as integers and refuses what is not decimal digits', () => {
    const window = { start: 'a', end: 'b' };
    expect(CoverageQuery.parse({ ...window, limit: '7' })).toMatchObject({ limit: 7 });
    expect(CoverageQuery.parse(window)).toMatchObject({ limit: 200 });
    for (const limit of ['1e3', ' 5', '0x10', '', '1001', '-1', ['1', '2']]) {
      expect(CoverageQuery.safeParse({ ...window, limit }).success, String(limit)).toBe(false);
    }
    const limit = document.paths['/v1/assets/{asset}/coverage'].get.parameters.find(
      (p: Json) => p.name === 'limit',
    );
    expect(limit).toMatchObject({ required: false, schema: { type: 'integer', minimum: 0, maximum: 1000 } });
  });

  it("gives only examples of events the worker's normaliser accepts", () => {
    const examples = (schema: z.ZodType) => (z.globalRegistry.get(schema)?.examples ?? []) as unknown[];
    const options = { maxPayloadBytes: 65_536 };
    expect(examples(EventItem).length).toBeGreaterThan(1);
    for (const event of examples(EventItem)) expect(() => normalizeEvent(event, options)).not.toThrow();
    for (const body of examples(ReplayRequirementBody)) {
      const event = { ...(body as object), type: 'replay_requirement', asset: 'a' };
      expect(normalizeEvent(event, options).kind).toBe('replay_requirement');
    }
  });
});

describe('the event spellings in the document', () => {
  it('describe each way of giving the bounds, each example allowed by the document and accepted', () => {
    const ajv = new Ajv2020({ strict: false });
    expect(EVENT_SPELLINGS.map((s) => s.title)).toEqual([
      'start and end',
      'interval',
      'partition_key',
      'Airflow extra',
    ]);
    const examples = EVENT_SCHEMA.examples as unknown[];
    expect(examples.length).toBeGreaterThan(EVENT_SPELLINGS.length);
    for (const example of examples) {
      expect(ajv.validate(EVENT_SCHEMA, example), JSON.stringify(example)).toBe(true);
      expect(() => normalizeEvent(example, { maxPayloadBytes: 65_536 })).not.toThrow();
    }
    // The body of POST /v1/events is one event or an array of them.
    const body = document.paths['/v1/events'].post.requestBody.content['application/json'].schema;
    const items = body.anyOf.map((alt: Json) => alt.items ?? alt);
    for (const item of items) expect(item.allOf).toHaveLength(4);
  });

  it('says which optional query parameters may be sent empty, and that empty is absent', () => {
    for (const { path, op } of operations) {
      for (const p of op.parameters as Json[]) {
        if (p.in !== 'query') continue;
        const what = `${path} ${p.name}`;
        if (p.required) expect(p.allowEmptyValue, what).toBeUndefined();
        else {
          expect(p.allowEmptyValue, what).toBe(true);
          expect(p.description, what).toMatch(/empty is the same as absent/);
        }
      }
    }
    const coverage = document.paths['/v1/assets/{asset}/coverage'].get.parameters as Json[];
    const start = coverage.find((p) => p.name === 'start')!;
    expect(start.required).toBe(true);
    expect(new RegExp(start.schema.pattern, 'u').test('')).toBe(false);
  });
});

describe('the document', () => {
  it('tags every operation with a group the document lists', () => {
    const listed = (document.tags as Json[]).map((t) => t.name);
    for (const { path, op } of operations) {
      expect(op.tags, path).toHaveLength(1);
      expect(listed, path).toContain(op.tags[0]);
    }
    expect(document.paths['/v1/events'].post.tags).toEqual(['events']);
    expect(document.paths['/v1/assets/{asset}/replay-requirements'].post.tags).toEqual(['events']);
    expect(document.paths['/healthz'].get.tags).toEqual(['operations']);
  });
});

describe('the server', () => {
  it('refuses to start with a /v1 route the document does not describe', async () => {
    const ctx = { config: parseConfig({}), log: createLogger('silent') } as unknown as HttpContext;
    const described = buildServer(ctx);
    await expect(described.ready()).resolves.toBeDefined();
    await described.close();
    expect(() => buildServer(ctx, [(app) => app.get('/v1/undescribed', async () => ({}))])).toThrow(
      /GET \/v1\/undescribed is not described/,
    );
  });
});
