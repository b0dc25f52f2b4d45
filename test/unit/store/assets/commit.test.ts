import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { concernsAny, eventsPayload } from '../../../../src/store/assets/commit.js';
import { committedAssets } from '../../../../src/store/assets/commit-listen.js';

describe('events channel payload', () => {
  const upstreams = new Set(['orders', 'payments']);

  it('wakes the scheduler only for commits that touch an upstream', () => {
    expect(concernsAny(committedAssets(eventsPayload(['orders'])), upstreams)).toBe(true);
    expect(concernsAny(committedAssets(eventsPayload(['clicks', 'payments'])), upstreams)).toBe(true);
    expect(concernsAny(committedAssets(eventsPayload(['clicks', 'views'])), upstreams)).toBe(false);
    expect(concernsAny(committedAssets(eventsPayload([])), upstreams)).toBe(false);
  });

  it('wakes it for anything it cannot read: a manual trigger, too many names, foreign payloads', () => {
    expect(concernsAny(committedAssets(''), upstreams)).toBe(true);
    const many = Array.from({ length: 1000 }, (_, i) => `some.rather.long.asset.name.${i}`);
    expect(eventsPayload(many)).toBe('');
    expect(concernsAny(committedAssets(eventsPayload(many)), upstreams)).toBe(true);
    expect(concernsAny(committedAssets('{"assets":[]}'), upstreams)).toBe(true);
    expect(concernsAny(committedAssets('[1]'), upstreams)).toBe(true);
  });

  it('round-trips any asset names and stays under the PostgreSQL payload limit', () => {
    fc.assert(
      fc.property(fc.array(fc.string({ minLength: 1, maxLength: 600, unit: 'grapheme' })), (names) => {
        const payload = eventsPayload(names);
        expect(Buffer.byteLength(payload, 'utf8')).toBeLessThan(8000);
        for (const name of names) expect(concernsAny(committedAssets(payload), new Set([name]))).toBe(true);
        if (payload !== '') expect(concernsAny(committedAssets(payload), new Set())).toBe(false);
      }),
    );
  });
});
