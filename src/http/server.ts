import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  LogController,
} from 'fastify';
import type { HttpContext } from './context.js';
import { HttpError } from './errors.js';
import { routeUrl } from './operation.js';
import { OPERATIONS } from './operations.js';
import { retryReadsOnLostConnection } from './retry-reads.js';
import { registerAssetRoutes } from './routes/assets.js';
import { registerEventRoutes } from './routes/events.js';
import { registerHealthRoutes } from './routes/health.js';
import { registerOpenApiRoute } from './routes/openapi.js';
import { registerRepairRoutes } from './routes/repairs.js';

export type RouteRegistrar = (app: FastifyInstance, ctx: HttpContext) => void;

export function buildServer(ctx: HttpContext, extraRoutes: readonly RouteRegistrar[] = []): FastifyInstance {
  const logger: FastifyBaseLogger = ctx.log.child({ component: 'http' });
  const app = Fastify({
    loggerInstance: logger,
    // Per-request lines would drown the decision log; errors are logged by the handler below.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: ctx.config.http.body_limit,
    // Asset names run to 512 characters, up to 9 each once percent-encoded; the router's default
    // of 100 would answer 414 for long URIs the worker has ingested.
    routerOptions: { maxParamLength: 512 * 9 },
    // A malformed or overlong path gets the same {code, message} body as every other error.
    frameworkErrors: (error, _request, reply) => {
      const {
        statusCode = 400,
        code,
        message,
      } = error as { statusCode?: number; code: string; message: string };
      void (reply as FastifyReply).status(statusCode).send({ code: code.toLowerCase(), message });
    },
  });
  // JSON bodies must be UTF-8: fastify's own parser decodes bad bytes to U+FFFD and accepts them,
  // which would turn a corrupted asset name or id into a new, silently different one.
  const strictUtf8 = new TextDecoder('utf-8', { fatal: true });
  // Keys named `__proto__` or `constructor` are data (an `extra` field may be called anything):
  // JSON.parse makes them own properties, and no code merges bodies into prototypes, so they are
  // parsed like the queue and `emit` parse them, not refused as "not valid JSON".
  const parseJson = app.getDefaultJsonParser('ignore', 'ignore');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    // Many clients send `content-type: application/json` on every POST, also with no body (the
    // retry and trigger actions take none): an empty body is no body, as without the header. A
    // route that needs one answers its own validation error; whitespace is not empty, and is not JSON.
    if ((body as Buffer).length === 0) {
      done(null, undefined);
      return;
    }
    let text: string;
    try {
      text = strictUtf8.decode(body as Buffer);
    } catch {
      done(new HttpError(400, 'invalid_json', 'the body is not valid UTF-8'), undefined);
      return;
    }
    parseJson(request, text, done);
  });
  app.setErrorHandler((error, request, reply) => {
    if (error instanceof HttpError) {
      if (error.headers) void reply.headers(error.headers);
      return reply.status(error.status).send({ code: error.code, message: error.message, ...error.details });
    }
    const {
      statusCode: status,
      code = 'bad_request',
      message,
    } = error as { statusCode?: number; code?: string; message: string };
    if (status && status >= 400 && status < 500) {
      return reply.status(status).send({ code: code.toLowerCase(), message });
    }
    request.log.error({ err: error, url: request.url }, 'request failed');
    return reply.status(500).send({ code: 'internal_error', message: 'internal error; see the daemon log' });
  });
  app.setNotFoundHandler((request, reply) =>
    reply
      .status(404)
      .send({ code: 'not_found', message: `no route ${request.method} ${request.url.split('?')[0]}` }),
  );
  // The description lists every operation (./operations.ts); a /v1 route outside it would be
  // served but undescribed, so it fails the start instead.
  const described = new Set(OPERATIONS.map((op) => `${op.method} ${routeUrl(op)}`));
  app.addHook('onRoute', ({ method, url }) => {
    const methods = [method].flat().filter((m) => m !== 'HEAD');
    if (url.startsWith('/v1/') && methods.some((m) => !described.has(`${m} ${url}`))) {
      throw new Error(`${methods.join(', ')} ${url} is not described: add it to src/http/operations.ts`);
    }
  });
  app.addHook('onRoute', retryReadsOnLostConnection);
  for (const register of [
    registerHealthRoutes,
    registerOpenApiRoute,
    registerAssetRoutes,
    registerEventRoutes,
    registerRepairRoutes,
    ...extraRoutes,
  ]) {
    register(app, ctx);
  }
  return app;
}
