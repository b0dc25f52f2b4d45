import { BadInputError } from '../errors.js';

/** Deepest nesting of `extra` (the object itself is level 1). */
const MAX_EXTRA_DEPTH = 32;

/** An event's `extra`: any JSON object that PostgreSQL's jsonb can store. */
export function extraOf(raw: unknown): Record<string, unknown> {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== 'object' || Array.isArray(raw))
    throw new BadInputError('invalid_field', 'extra must be a JSON object');
  checkStorable(raw);
  return raw as Record<string, unknown>;
}

/**
 * `extra` is stored (as json text, which any reader may cast to jsonb) and hashed: refuse what
 * PostgreSQL's jsonb cannot hold (U+0000, lone surrogates, in keys or values) and nesting deeper than MAX_EXTRA_DEPTH, which no producer needs
 * and which would otherwise overflow the stack of every recursive serialiser on the way (the
 * content hash, the driver's JSON.stringify) and fail the job instead of dead-lettering it.
 * Iterative, so the check itself survives any depth.
 */
function checkStorable(root: object): void {
  const stack: Array<readonly [unknown, number]> = [[root, 1]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!;
    if (typeof value === 'string') {
      if (!storableText(value)) throw unstorable();
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    if (depth > MAX_EXTRA_DEPTH) {
      throw new BadInputError('invalid_field', `extra is nested more than ${MAX_EXTRA_DEPTH} levels deep`);
    }
    if (Array.isArray(value)) {
      for (const item of value) stack.push([item, depth + 1]);
      continue;
    }
    for (const [key, item] of Object.entries(value)) {
      if (!storableText(key)) throw unstorable();
      stack.push([item, depth + 1]);
    }
  }
}

const storableText = (text: string) => !text.includes('\u0000') && text.isWellFormed();
const unstorable = () =>
  new BadInputError(
    'invalid_field',
    'extra holds text PostgreSQL cannot store (U+0000 or a lone UTF-16 surrogate)',
  );
