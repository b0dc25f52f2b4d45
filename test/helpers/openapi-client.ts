/**
 * What a third-party client generated from `/openapi.json` sees: openapi-typescript turns the
 * document into types, and the TypeScript compiler checks, for EVERY operation in the document
 * (routes added later included, with no list to update), a call built from its own schemas, the
 * request bodies of every documented example (each event spelling), the real answers the test
 * saw, and calls that must NOT type-check (so a document that types everything as `unknown` fails).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import openapiTS from 'openapi-typescript';
import { packageRoot } from '../../src/support/paths.js';

// biome-ignore lint/suspicious/noExplicitAny: the document is read as untyped JSON
type Json = Record<string, any>;

/** A request (and optionally an answer) written as the client would, to be compiled. */
export interface ClientCall {
  readonly path: string;
  readonly method: string;
  readonly parameters?: { path?: Json; query?: Json };
  readonly body?: unknown;
  /** A real answer to assign to the generated type of that status. */
  readonly answer?: { status: number; body: unknown };
  /** true: the compiler must refuse it (`@ts-expect-error`). */
  readonly refused?: boolean;
}

/** One call per operation, built from the document's own parameter and body schemas. */
export function callsOfEveryOperation(document: Json): ClientCall[] {
  const sample = sampler(document);
  const calls: ClientCall[] = [];
  for (const [path, item] of Object.entries(document.paths as Json)) {
    for (const [method, op] of Object.entries(item as Json)) {
      const parameters: { path?: Json; query?: Json } = {};
      for (const p of (op.parameters ?? []) as Json[]) {
        if (p.in !== 'path' && !(p.in === 'query' && p.required)) continue;
        const where = p.in as 'path' | 'query';
        parameters[where] = { ...parameters[where], [p.name]: sample(p.schema) };
      }
      const body = op.requestBody?.content?.['application/json']?.schema;
      // A client passes `parameters` (maybe empty) exactly when the operation declares some.
      const declared = (op.parameters ?? []).length > 0 ? { parameters } : {};
      calls.push({ path, method, ...declared, ...(body ? { body: sample(body) } : {}) });
      // Every documented example of a body (each event spelling), alone and as an array.
      for (const example of body ? examplesIn(document, body) : [])
        calls.push({ path, method, ...declared, body: example });
    }
  }
  return calls;
}

/** Generates the types and compiles the calls; answers the compiler's complaints ('' when none). */
export async function typeCheckCalls(document: Json, calls: readonly ClientCall[]): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'cr-openapi-client-'));
  try {
    writeFileSync(join(dir, 'schema.ts'), await openapiTS(document as never, {}));
    writeFileSync(join(dir, 'calls.ts'), callsSource(calls));
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noEmit: true,
          target: 'ES2022',
          module: 'ESNext',
          moduleResolution: 'Bundler',
          types: [],
          noUnusedLocals: false,
        },
        files: ['schema.ts', 'calls.ts'],
      }),
    );
    const tsc = join(packageRoot(), 'node_modules', 'typescript', 'bin', 'tsc');
    try {
      await promisify(execFile)(process.execPath, [tsc, '-p', dir], { cwd: dir, maxBuffer: 8 << 20 });
      return '';
    } catch (error) {
      const { stdout = '', stderr = '' } = error as { stdout?: string; stderr?: string };
      return `${stdout}${stderr}`.trim() || String(error);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * A typed `call(path, method, request)` over the generated `paths`, as openapi-fetch and the like
 * type it: `parameters` and `body` exactly as the operation declares them.
 */
const PRELUDE = `import type { paths } from './schema';

type JsonOf<T> = T extends { content: { 'application/json': infer B } } ? B : never;
type Request<O> = (O extends { parameters: infer P } ? { parameters: P } : O extends { parameters?: infer P } ? { parameters?: P } : { parameters?: never }) &
  (O extends { requestBody: infer R } ? { body: JsonOf<R> } : O extends { requestBody?: infer R } ? { body?: JsonOf<NonNullable<R>> } : { body?: never });
type Answer<O, S> = O extends { responses: infer R } ? (S extends keyof R ? JsonOf<R[S]> : never) : never;

declare function call<P extends keyof paths, M extends keyof paths[P]>(path: P, method: M, request: Request<paths[P][M]>): void;
declare function answer<P extends keyof paths, M extends keyof paths[P], S extends number>(path: P, method: M, status: S, body: Answer<paths[P][M], S>): void;
`;

function callsSource(calls: readonly ClientCall[]): string {
  const lines = [PRELUDE];
  for (const c of calls) {
    const request = {
      ...(c.parameters === undefined ? {} : { parameters: c.parameters }),
      ...(c.body === undefined ? {} : { body: c.body }),
    };
    if (c.refused) lines.push('// @ts-expect-error the document must refuse this request');
    lines.push(`call(${JSON.stringify(c.path)}, ${JSON.stringify(c.method)}, ${JSON.stringify(request)});`);
    if (c.answer)
      lines.push(
        `answer(${JSON.stringify(c.path)}, ${JSON.stringify(c.method)}, ${c.answer.status}, ${JSON.stringify(c.answer.body)});`,
      );
  }
  return `${lines.join('\n')}\n`;
}

/** `examples` of the schema and of each of its alternatives (an array body: its items'). */
function examplesIn(document: Json, schema: Json): unknown[] {
  const found: unknown[] = [];
  const walk = (node: Json | undefined, asArray: boolean): void => {
    if (!node || typeof node !== 'object') return;
    if (node.$ref) {
      walk(resolve(document, node.$ref), asArray);
      return;
    }
    for (const example of (node.examples ?? []) as unknown[]) found.push(asArray ? [example] : example);
    for (const option of [...(node.anyOf ?? []), ...(node.oneOf ?? [])] as Json[]) walk(option, asArray);
    if (node.type === 'array') walk(node.items, true);
  };
  walk(schema, false);
  return found;
}

/** A value of the schema's type: its example, its first enum value, or the smallest that fits. */
function sampler(document: Json) {
  const sample = (schema: Json | undefined, depth = 0): unknown => {
    if (!schema || depth > 8) return null;
    if (schema.$ref) return sample(resolve(document, schema.$ref), depth + 1);
    if (schema.examples?.length) return schema.examples[0];
    if (schema.const !== undefined) return schema.const;
    if (schema.enum?.length) return schema.enum[0];
    const option = schema.anyOf?.[0] ?? schema.oneOf?.[0];
    if (option) return sample(option, depth + 1);
    const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
    switch (type) {
      case 'string':
        return 'x';
      case 'integer':
      case 'number':
        return schema.minimum ?? 1;
      case 'boolean':
        return true;
      case 'null':
        return null;
      case 'array':
        return Array.from({ length: schema.minItems ?? 0 }, () => sample(schema.items, depth + 1));
      default: {
        const object: Json = {};
        for (const name of (schema.required ?? []) as string[])
          object[name] = sample(schema.properties?.[name], depth + 1);
        return object;
      }
    }
  };
  return sample;
}

function resolve(document: Json, ref: string): Json | undefined {
  return ref
    .slice(2)
    .split('/')
    .map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~'))
    .reduce<Json | undefined>((node, part) => node?.[part], document);
}
