/** Validates answers against an OpenAPI 3.1 document with a JSON Schema 2020-12 validator. */
import { Ajv2020 } from 'ajv/dist/2020.js';

type Json = Record<string, unknown>;

const pointer = (...parts: string[]) =>
  parts.map((p) => p.replaceAll('~', '~0').replaceAll('/', '~1')).join('/');

/** Every `$ref` in `document` that does not point at something in it. */
export function unresolvedRefs(document: unknown): string[] {
  const missing: string[] = [];
  const resolve = (ref: string) =>
    ref
      .slice(2)
      .split('/')
      .map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~'))
      .reduce<unknown>((node, part) => (node as Json | undefined)?.[part], document);
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(walk);
    else if (node !== null && typeof node === 'object') {
      for (const [key, value] of Object.entries(node)) {
        if (key === '$ref' && (typeof value !== 'string' || !value.startsWith('#/') || !resolve(value))) {
          missing.push(String(value));
        } else walk(value);
      }
    }
  };
  walk(document);
  return missing;
}

export interface Checked {
  /** Ajv's errors, or null when the body conforms. */
  readonly errors: string | null;
}

/**
 * `check(method, path, status, body)` validates a body against the schema the document gives
 * that operation's answer (path as the document writes it: `/v1/assets/{asset}/coverage`).
 * Strict mode: a keyword the validator does not know fails the compile, so a schema that would
 * silently accept everything cannot pass for a checked one.
 */
export function answerChecker(document: Json) {
  // `date-time` is checked by the pattern zod writes beside it.
  const ajv = new Ajv2020({ strict: true, allErrors: true, formats: { 'date-time': true } });
  ajv.addVocabulary(['openapi', 'info', 'servers', 'tags', 'paths', 'components']);
  ajv.addSchema(document, 'openapi.json');
  return (method: string, path: string, status: number, body: unknown, contentType = 'application/json') => {
    const at = pointer(
      'paths',
      path,
      method.toLowerCase(),
      'responses',
      String(status),
      'content',
      contentType,
    );
    const validate = ajv.getSchema(`openapi.json#/${at}/schema`);
    if (!validate)
      throw new Error(`the document has no ${contentType} answer ${status} for ${method} ${path}`);
    const ok = validate(body);
    return { errors: ok ? null : ajv.errorsText(validate.errors) } satisfies Checked;
  };
}
