/** Cursor pagination shared by the listings: opaque cursors (page sizes are query schemas). */
import { HttpError } from '../errors.js';

/** Opaque to clients; carries which listing order it continues so it cannot be mixed up. */
export function encodeCursor(kind: string, value: string): string {
  return Buffer.from(`${kind}.${value}`, 'utf8').toString('base64url');
}

export function decodeCursor(cursor: string, kind: string): string {
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  // We never issue U+0000 (no name holds one), and PostgreSQL could not compare it.
  if (!text.startsWith(`${kind}.`) || text.length === kind.length + 1 || text.includes('\u0000')) {
    throw new HttpError(400, 'invalid_cursor', 'cursor is not one this listing returned (in this order)');
  }
  return text.slice(kind.length + 1);
}
