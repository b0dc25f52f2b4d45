import { describe, expect, it } from 'vitest';
import { Hold } from '../../../src/ingest/hold.js';

describe('Hold', () => {
  it('tells its listener once, with the reason of the first release', () => {
    const hold = new Hold();
    const heard: unknown[] = [];
    hold.onRelease((reason) => heard.push(reason));
    expect(hold.released).toBe(false);
    hold.release('paused');
    hold.release('again');
    expect(hold.released).toBe(true);
    expect(hold.reason).toBe('paused');
    expect(heard).toEqual(['paused']);
  });

  it('tells only the latest listener', () => {
    const hold = new Hold();
    const heard: string[] = [];
    hold.onRelease(() => heard.push('first'));
    hold.onRelease(() => heard.push('second'));
    hold.release(undefined);
    expect(heard).toEqual(['second']);
  });
});
