/**
 * A request no route takes is answered before its body is read: 405 with an `Allow` header when
 * the path is served with other methods (TRACE /healthz, PUT /v1/events, QUERY or OPTIONS
 * anywhere), 404 when no method serves it. fastify answers 404 for both, after parsing the body,
 * so a wrong method could get 415 or 400 for a body it never needed.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** The order methods are listed in `Allow`. */
const ORDER = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'];

export function answerUnroutedRequests(app: FastifyInstance): void {
  const served: Array<{ readonly segments: readonly string[]; readonly methods: Set<string> }> = [];
  app.addHook('onRoute', ({ method, url }) => {
    const segments = url.split('/');
    let route = served.find((r) => r.segments.join('/') === url);
    if (!route) {
      route = { segments, methods: new Set() };
      served.push(route);
    }
    for (const m of [method].flat()) route.methods.add(m);
  });

  /** The methods some route serves `path` with; empty when none does. */
  const methodsAt = (path: string): string[] => {
    const parts = path.split('/');
    const methods = new Set<string>();
    for (const { segments, methods: m } of served) {
      if (segments.length !== parts.length) continue;
      // `:name` takes one non-empty segment, as fastify's router does.
      const matches = segments.every((s, i) => (s.startsWith(':') ? parts[i] !== '' : s === parts[i]));
      if (matches) for (const method of m) methods.add(method);
    }
    return [...methods].sort((a, b) => rank(a) - rank(b));
  };

  const notFound = (request: FastifyRequest, reply: FastifyReply, path: string) =>
    reply.status(404).send({ code: 'not_found', message: `no route ${request.method} ${path}` });
  app.setNotFoundHandler((request, reply) => notFound(request, reply, request.url.split('?')[0]!));

  app.addHook('onRequest', async (request, reply) => {
    if (!request.is404) return;
    const path = request.url.split('?')[0]!;
    const allowed = methodsAt(path);
    if (allowed.length === 0) return notFound(request, reply, path);
    return reply
      .status(405)
      .header('allow', allowed.join(', '))
      .send({
        code: 'method_not_allowed',
        message: `${request.method} is not served at ${path}; it takes ${allowed.join(', ')}`,
      });
  });
}

function rank(method: string): number {
  const at = ORDER.indexOf(method);
  return at === -1 ? ORDER.length : at;
}
