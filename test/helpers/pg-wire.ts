import type { ChunkWatcher } from './blackhole-proxy.js';

const SSL_REQUEST = 80877103;
const GSS_REQUEST = 80877104;

/**
 * Reads the statements a PostgreSQL client sends (frontend protocol 3): the text of each simple
 * Query, and of each Bind through the Parse that named its statement (postgres.js prepares a
 * statement once per connection, then only binds it). Chunks may split or join messages.
 */
export function statementReader(onStatement: (text: string) => void): (chunk: Buffer) => void {
  let buffer = Buffer.alloc(0);
  let started = false;
  const statements = new Map<string, string>();
  const cString = (body: Buffer, at: number): [string, number] => {
    const end = body.indexOf(0, at);
    return [body.toString('utf8', at, end), end + 1];
  };
  return (chunk) => {
    buffer = Buffer.concat([buffer, chunk]);
    for (;;) {
      if (!started) {
        // The startup packet (or an SSL/GSS request before it) has no type byte.
        if (buffer.length < 8) return;
        const length = buffer.readInt32BE(0);
        if (buffer.length < length) return;
        const code = buffer.readInt32BE(4);
        started = code !== SSL_REQUEST && code !== GSS_REQUEST;
        buffer = buffer.subarray(length);
        continue;
      }
      if (buffer.length < 5) return;
      const length = buffer.readInt32BE(1);
      if (buffer.length < 1 + length) return;
      const type = String.fromCharCode(buffer[0]!);
      const body = buffer.subarray(5, 1 + length);
      buffer = buffer.subarray(1 + length);
      if (type === 'Q') onStatement(cString(body, 0)[0]);
      else if (type === 'P') {
        const [name, at] = cString(body, 0);
        statements.set(name, cString(body, at)[0]);
      } else if (type === 'B') {
        const [, at] = cString(body, 0); // the portal
        onStatement(statements.get(cString(body, at)[0]) ?? '');
      }
    }
  };
}

/**
 * A watcher that marks the chunk carrying the COMMIT of a transaction that inserted into
 * `table`: cutting there leaves that transaction in flight, every statement before the commit
 * executed by the server, the commit itself waiting in the partition.
 */
export function commitAfterInsertInto(table: string): () => ChunkWatcher {
  const insert = new RegExp(`^\\s*insert\\s+into\\s+${table}\\b`, 'i');
  return () => {
    let inserted = false;
    let commit = false;
    const read = statementReader((text) => {
      if (insert.test(text)) inserted = true;
      else if (/^\s*(commit|rollback)\b/i.test(text)) {
        commit ||= inserted && /^\s*commit/i.test(text);
        inserted = false;
      }
    });
    return (chunk) => {
      commit = false;
      read(chunk);
      return commit;
    };
  };
}

/** One execution a client asked for: the statement's text, its parameter types and text values. */
export interface BoundStatement {
  readonly text: string;
  /** Type OIDs from the Parse (0: left for the server to infer). */
  readonly types: readonly number[];
  /** Text-format values from the Bind (postgres.js sends every parameter as text). */
  readonly params: ReadonlyArray<string | null>;
}

/**
 * Like statementReader, with each Bind's parameters: enough to EXPLAIN later exactly what the
 * client ran (see test/integration/plans.test.ts). A simple Query has no parameters.
 */
export function boundStatementReader(onBound: (s: BoundStatement) => void): (chunk: Buffer) => void {
  let buffer = Buffer.alloc(0);
  let started = false;
  const parsed = new Map<string, { text: string; types: number[] }>();
  const cString = (body: Buffer, at: number): [string, number] => {
    const end = body.indexOf(0, at);
    return [body.toString('utf8', at, end), end + 1];
  };
  return (chunk) => {
    buffer = Buffer.concat([buffer, chunk]);
    for (;;) {
      if (!started) {
        if (buffer.length < 8) return;
        const length = buffer.readInt32BE(0);
        if (buffer.length < length) return;
        const code = buffer.readInt32BE(4);
        started = code !== SSL_REQUEST && code !== GSS_REQUEST;
        buffer = buffer.subarray(length);
        continue;
      }
      if (buffer.length < 5) return;
      const length = buffer.readInt32BE(1);
      if (buffer.length < 1 + length) return;
      const type = String.fromCharCode(buffer[0]!);
      const body = buffer.subarray(5, 1 + length);
      buffer = buffer.subarray(1 + length);
      if (type === 'Q') onBound({ text: cString(body, 0)[0], types: [], params: [] });
      else if (type === 'P') {
        const [name, at] = cString(body, 0);
        const [text, next] = cString(body, at);
        const n = body.readInt16BE(next);
        const types = Array.from({ length: n }, (_, i) => body.readUInt32BE(next + 2 + 4 * i));
        parsed.set(name, { text, types });
      } else if (type === 'B') {
        const [, at] = cString(body, 0); // the portal
        const [name, next] = cString(body, at);
        const statement = parsed.get(name);
        let pos = next;
        const formats = body.readInt16BE(pos);
        pos += 2 + 2 * formats;
        const n = body.readInt16BE(pos);
        pos += 2;
        const params: (string | null)[] = [];
        for (let i = 0; i < n; i++) {
          const len = body.readInt32BE(pos);
          pos += 4;
          if (len < 0) params.push(null);
          else {
            params.push(body.toString('utf8', pos, pos + len));
            pos += len;
          }
        }
        if (statement) onBound({ text: statement.text, types: statement.types, params });
      }
    }
  };
}

/**
 * A watcher that cuts a transaction mid-pipeline: at the Sync that follows the first Bind of a
 * statement matching `pattern` (e.g. one that takes row locks), so the server runs that statement
 * (or waits on a lock for it) and then waits for the rest of the pipeline. Such a backend shows
 * as `active` in pg_stat_activity (ClientRead once the statement is done): neither
 * idle_in_transaction_session_timeout nor statement_timeout ends it (PostgreSQL disables the
 * statement timeout when an Execute completes, and arms the idle one only at a Sync).
 */
export function syncAfterStatement(pattern: RegExp): () => ChunkWatcher {
  return () => {
    let buffer = Buffer.alloc(0);
    let started = false;
    let matched = false;
    const statements = new Map<string, string>();
    const cString = (body: Buffer, at: number): [string, number] => {
      const end = body.indexOf(0, at);
      return [body.toString('utf8', at, end), end + 1];
    };
    return (chunk) => {
      const carried = buffer.length;
      buffer = Buffer.concat([buffer, chunk]);
      let at = 0;
      let cut: number | false = false;
      for (;;) {
        if (!started) {
          if (buffer.length - at < 8) break;
          const length = buffer.readInt32BE(at);
          if (buffer.length - at < length) break;
          const code = buffer.readInt32BE(at + 4);
          started = code !== SSL_REQUEST && code !== GSS_REQUEST;
          at += length;
          continue;
        }
        if (buffer.length - at < 5) break;
        const length = buffer.readInt32BE(at + 1);
        if (buffer.length - at < 1 + length) break;
        const type = String.fromCharCode(buffer[at]!);
        const body = buffer.subarray(at + 5, at + 1 + length);
        if (type === 'P') {
          const [name, next] = cString(body, 0);
          statements.set(name, cString(body, next)[0]);
        } else if (type === 'B') {
          const [, next] = cString(body, 0);
          if (pattern.test(statements.get(cString(body, next)[0]) ?? '')) matched = true;
        } else if (type === 'S' && matched) {
          matched = false;
          if (cut === false) cut = Math.max(0, at - carried);
        }
        at += 1 + length;
      }
      buffer = buffer.subarray(at);
      return cut;
    };
  };
}
