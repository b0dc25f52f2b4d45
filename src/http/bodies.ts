/** How request bodies are read: the content types the API takes, and how their bytes are decoded. */
import type { FastifyInstance } from 'fastify';
import { HttpError } from './errors.js';

export function registerBodyParsers(app: FastifyInstance): void {
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
}
