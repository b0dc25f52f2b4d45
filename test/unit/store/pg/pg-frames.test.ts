import { describe, expect, it } from 'vitest';
import { FrameReader } from '../../../../src/store/pg/pg-frames.js';

const message = (type: string, body: Buffer) => {
  const head = Buffer.alloc(5);
  head.write(type, 0);
  head.writeInt32BE(4 + body.length, 1);
  return Buffer.concat([head, body]);
};
const ready = message('Z', Buffer.from('I'));
const row = message('D', Buffer.alloc(3000, 7));
const notice = message('A', Buffer.from('channel\0payload\0'));

/** Feeds `stream` in chunks of `size`; returns what was passed on and the types seen. */
function feed(stream: Buffer, size: number, drop: (type: string) => boolean) {
  const types: string[] = [];
  const reader = new FrameReader(true, (type) => {
    types.push(String.fromCharCode(type));
    return !drop(String.fromCharCode(type));
  });
  const out: Buffer[] = [];
  for (let i = 0; i < stream.length; i += size) out.push(reader.push(stream.subarray(i, i + size)));
  return { passed: Buffer.concat(out), types };
}

describe('FrameReader', () => {
  const stream = Buffer.concat([notice, ready, row, ready, notice]);

  it('passes every byte on, in order, however the stream is split', () => {
    for (const size of [1, 2, 5, 6, 7, 100, stream.length]) {
      const { passed, types } = feed(stream, size, () => false);
      expect(passed.equals(stream), `chunks of ${size}`).toBe(true);
      expect(types).toEqual(['A', 'Z', 'D', 'Z', 'A']);
    }
  });

  it('takes a dropped ReadyForQuery out of the stream, split or not, and nothing else', () => {
    for (const size of [1, 3, 6, 4096]) {
      let dropped = 0;
      const { passed } = feed(stream, size, (type) => type === 'Z' && dropped++ === 0);
      expect(passed.equals(Buffer.concat([notice, row, ready, notice])), `chunks of ${size}`).toBe(true);
    }
  });

  it('hands the chunk itself on when nothing is held or dropped', () => {
    const reader = new FrameReader(true, () => true);
    expect(reader.push(stream)).toBe(stream);
  });
});
