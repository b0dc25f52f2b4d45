/**
 * Splits one direction of a PostgreSQL protocol stream into messages (a type byte, then a length
 * that counts itself) and reports each type, for the stale-connection watch. Bodies are read only
 * for the server's BackendKeyData and ReadyForQuery (a few bytes each): the rest of a long message
 * (a big row) is passed on as it comes, not buffered. The client's first message (startup) has no
 * type byte. A client that asks for TLS or GSS encryption makes the stream opaque: from then on
 * nothing is read and everything is passed on as is.
 */
export class FrameReader {
  /** Bytes of a message whose head (or needed body) is not complete yet: not passed on yet. */
  private pending: Buffer = Buffer.alloc(0);
  /** Bytes of the current message's body still to pass on unread. */
  private skip = 0;
  private started: boolean;
  opaque = false;

  /** `onMessage` returns false to drop the message from what is passed on (only bodies it reads). */
  constructor(
    serverSide: boolean,
    private readonly onMessage: (type: number, body: Buffer) => boolean | undefined,
  ) {
    this.started = serverSide;
  }

  /** Reads a chunk; returns the bytes to pass on (the chunk itself unless something was held or dropped). */
  push(chunk: Buffer): Buffer {
    if (this.opaque) return chunk;
    const out: Buffer[] = [];
    let data = chunk;
    if (this.skip > 0) {
      const skipped = Math.min(this.skip, data.length);
      this.skip -= skipped;
      out.push(data.subarray(0, skipped));
      data = data.subarray(skipped);
    }
    const held = this.pending.length > 0;
    let buffer = held ? Buffer.concat([this.pending, data]) : data;
    for (;;) {
      if (!this.started) {
        if (buffer.length < 8) break;
        const length = buffer.readInt32BE(0);
        const code = buffer.readInt32BE(4);
        if (code === 80877103 || code === 80877104) {
          this.opaque = true; // SSLRequest, GSSENCRequest: encrypted from here on
          out.push(buffer);
          buffer = Buffer.alloc(0);
          break;
        }
        if (buffer.length < length) break;
        this.started = true;
        out.push(buffer.subarray(0, length));
        buffer = buffer.subarray(length);
        continue;
      }
      if (buffer.length < 5) break;
      const type = buffer[0]!;
      const total = 1 + buffer.readInt32BE(1);
      if (buffer.length < total) {
        if (type === 0x4b || type === 0x5a) break; // BackendKeyData, ReadyForQuery: wait for the body
        this.onMessage(type, Buffer.alloc(0));
        out.push(buffer);
        this.skip = total - buffer.length;
        buffer = Buffer.alloc(0);
        break;
      }
      if (this.onMessage(type, buffer.subarray(5, total)) !== false) out.push(buffer.subarray(0, total));
      buffer = buffer.subarray(total);
    }
    this.pending = buffer;
    // Nothing held from before and every byte passed on: the chunk as it came, without a copy.
    const passed = out.reduce((n, b) => n + b.length, 0);
    return !held && passed === chunk.length ? chunk : Buffer.concat(out, passed);
  }
}
