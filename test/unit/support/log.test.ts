import { afterEach, describe, expect, it, vi } from 'vitest';
import { type Logger, throttledErrors } from '../../../src/support/log.js';

describe('throttledErrors', () => {
  afterEach(() => vi.useRealTimers());

  it('says each distinct error once a minute while it repeats, and a new one at once', () => {
    vi.useFakeTimers({ now: 0 });
    const lines: Array<[Record<string, unknown>, string]> = [];
    const log = { error: (fields: Record<string, unknown>, msg: string) => lines.push([fields, msg]) };
    const say = throttledErrors(log as unknown as Logger);
    const refused = new Error('connect ECONNREFUSED 127.0.0.1:6390');
    for (let i = 0; i < 50; i++) say({ queue: 'q' }, refused, 'events worker error');
    say({ queue: 'q' }, new Error('READONLY'), 'events worker error');
    expect(lines.map(([f]) => (f.err as Error).message)).toEqual([refused.message, 'READONLY']);
    expect(lines[0]![0]).toMatchObject({ queue: 'q' });
    vi.setSystemTime(59_999);
    say({ queue: 'q' }, refused, 'events worker error');
    expect(lines).toHaveLength(2);
    vi.setSystemTime(60_000);
    say({ queue: 'q' }, refused, 'events worker error');
    expect(lines).toHaveLength(3);
  });
});
