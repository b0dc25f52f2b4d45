import type { FastifyInstance } from 'fastify';
import { packageVersion } from '../../support/paths.js';
import type { HttpContext } from '../context.js';
import { openApiDocument } from '../openapi.js';
import { OPERATIONS } from '../operations.js';
import { route } from '../route.js';
import { openapi } from '../schemas/health.js';

/**
 * `GET /openapi.json`, generated once at start from every operation, whichever registrars this
 * server was built with (the rollup routes are the daemon's), so any instance describes the API.
 */
export function registerOpenApiRoute(app: FastifyInstance, ctx: HttpContext): void {
  const document = openApiDocument(OPERATIONS, packageVersion());
  route(app, ctx, openapi, async () => document as { openapi: '3.1.0' });
}
