/**
 * How request bodies are read. A body is JSON in UTF-8, sent as `application/json`; a body of any
 * other type is refused with 415 before a byte of it is decoded, so no second decoding (fastify's
 * `text/plain` parser turned bad bytes into U+FFFD) can let text through that the JSON path
 * refuses. An empty body counts as none whatever its type (docs/http-api.md "Request bodies").
 */
import type { FastifyInstance } from 'fastify';
import { HttpError } from './errors.js';

export function registerBodyParsers(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  // JSON bodies must be UTF-8: fastify's own parser decodes bad bytes to U+FFFD and accepts them,
  // which would turn a corrupted asset name or id into a new, silently different one.
  const strictUtf8 = new TextDecoder('utf-8', { fatal: true });
  // Keys named `__proto__` or `constructor` are data (an `extra` field may be called anything):
  // JSON.parse makes them own properties, and no code merges bodies into prototypes, so they are
  // parsed like the queue and `emit` parse them, not refused as "not valid JSON".
  const parseJson = app.getDefaultJsonParser('ignore', 'ignore');
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
  // `curl -d ''` sends `application/x-www-form-urlencoded`, some clients `text/plain`, on POSTs that
  // take no body (trigger, retry): an empty body is no body, as for JSON. Anything else is 415.
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (request, body, done) => {
    if ((body as Buffer).length === 0) {
      done(null, undefined);
      return;
    }
    const header = request.headers['content-type'];
    const what =
      header === undefined
        ? 'a body without a content-type'
        : `a body of type ${header.split(';')[0]!.trim()}`;
    const message = `${what} is not read: send JSON as application/json`;
    done(new HttpError(415, 'fst_err_ctp_invalid_media_type', message), undefined);
  });
}
