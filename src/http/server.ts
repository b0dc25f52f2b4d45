import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  LogController,
} from 'fastify';
import { registerBodyParsers } from './bodies.js';
import type { HttpContext } from './context.js';
import { HttpError } from './errors.js';
import { answerUnroutedRequests } from './methods.js';
import { routeUrl } from './operation.js';
import { OPERATIONS } from './operations.js';
import { retryReadsOnLostConnection } from './retry-reads.js';
import { registerAssetRoutes } from './routes/assets.js';
import { registerAuditRoute } from './routes/audit.js';
import { registerEventRoutes } from './routes/events.js';
import { registerHealthRoutes } from './routes/health.js';
import { registerOpenApiRoute } from './routes/openapi.js';
import { registerRepairRoutes } from './routes/repairs.js';
import { HEADERS_TIMEOUT_MS, REQUEST_TIMEOUT_MS, TIMEOUT_CHECK_MS } from './timeouts.js';

export type RouteRegistrar = (app: FastifyInstance, ctx: HttpContext) => void;

export function buildServer(ctx: HttpContext, extraRoutes: readonly RouteRegistrar[] = []): FastifyInstance {
  const logger: FastifyBaseLogger = ctx.log.child({ component: 'http' });
  const app = Fastify({
    loggerInstance: logger,
    // Per-request lines would drown the decision log; errors are logged by the handler below.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: ctx.config.http.body_limit,
    // Asset names run to 512 characters, up to 12 each once percent-encoded (4 UTF-8 bytes); the
    // router's default of 100 would answer 414 for long URIs the worker has ingested.
    routerOptions: { maxParamLength: 512 * 12 },
    // Slow or silent clients do not hold a connection (docs/http-api.md "Timeouts"): the request
    // line and headers must arrive within HEADERS_TIMEOUT_MS of connecting, also when not a byte
    // comes (Node's default is 60 s, checked every 30 s), the whole request within
    // REQUEST_TIMEOUT_MS (fastify's default is none); either answers 408 and closes. Idle
    // keep-alive connections between requests are closed by fastify's keepAliveTimeout (72 s).
    requestTimeout: REQUEST_TIMEOUT_MS,
    http: { headersTimeout: HEADERS_TIMEOUT_MS, connectionsCheckingInterval: TIMEOUT_CHECK_MS },
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
  registerBodyParsers(app);
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
  answerUnroutedRequests(app);
  // The description lists every operation (./operations.ts); a /v1 route outside it would be
  // served but undescribed, so it fails the start instead.
  const described = new Set(OPERATIONS.map((op) => `${op.method} ${routeUrl(op)}`));
  app.addHook('onRoute', ({ method, url }) => {
    const methods = [method].flat().filter((m) => m !== 'HEAD');
    if (url.startsWith('/v1/') && methods.some((m) => !described.has(`${m} ${url}`))) {
      throw new Error(`${methods.join(', ')} ${url} is not described: add it to src/http/operations.ts`);
    }
  });
  app.addHook('onRoute', retryReadsOnLostConnection(ctx.config.queue.pg_stall_timeout));
  for (const register of [
    registerHealthRoutes,
    registerOpenApiRoute,
    registerAssetRoutes,
    registerEventRoutes,
    registerRepairRoutes,
    registerAuditRoute,
    ...extraRoutes,
  ]) {
    register(app, ctx);
  }
  return app;
}
