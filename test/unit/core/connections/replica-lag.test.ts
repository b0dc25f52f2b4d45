import { describe, expect, it } from 'vitest';
import {
  parseLsn,
  readState,
  recordBoundary,
  WalHistory,
} from '../../../../src/core/connections/replica-lag.js';

describe('replica lag from WAL positions', () => {
  it('parses pg_lsn text, refusing anything else', () => {
    expect(parseLsn('0/3000000')).toBe(0x3000000n);
    expect(parseLsn('16/B374D848')).toBe((0x16n << 32n) | 0xb374d848n);
    expect(() => parseLsn('3000000')).toThrow('not a WAL position');
    expect(() => parseLsn('0/123456789')).toThrow('not a WAL position');
  });

  it('takes a WAL position just past a page header as the page boundary a replica stops at', () => {
    const block = 8192n;
    const segment = 16n * 1024n * 1024n;
    expect(recordBoundary(parseLsn('0/4000028'), block, segment)).toBe(parseLsn('0/4000000'));
    expect(recordBoundary(parseLsn('0/4002018'), block, segment)).toBe(parseLsn('0/4002000'));
    expect(recordBoundary(parseLsn('0/3441988'), block, segment)).toBe(parseLsn('0/3441988'));
    expect(recordBoundary(parseLsn('0/4002028'), block, segment)).toBe(parseLsn('0/4002028'));
  });

  it('dates the replica by the newest primary sample it has replayed past', () => {
    const history = new WalHistory(60_000);
    history.add({ at: 1000, lsn: 100n });
    history.add({ at: 1250, lsn: 200n });
    history.add({ at: 1500, lsn: 300n });
    // Between two samples: it has what the primary had at 1250, maybe more, so as_of is 1250.
    expect(history.position(250n, 1600)).toEqual({ asOf: 1250, lagMs: 350 });
    expect(history.position(300n, 1600)).toEqual({ asOf: 1500, lagMs: 100 });
  });

  it('reports an idle, caught-up replica as current, however old its last replayed transaction', () => {
    const history = new WalHistory(60_000);
    for (let at = 0; at <= 10_000; at += 250) history.add({ at, lsn: 500n });
    expect(history.position(500n, 10_100)).toEqual({ asOf: 10_000, lagMs: 100 });
  });

  it('gives a lower bound and no as_of for a replica behind every kept sample', () => {
    const history = new WalHistory(1000);
    history.add({ at: 0, lsn: 100n });
    history.add({ at: 900, lsn: 200n });
    expect(history.position(50n, 1000)).toEqual({ asOf: null, lagMs: 1000 });
    history.add({ at: 1800, lsn: 300n }); // the sample at 0 falls out of the kept second
    expect(history.position(50n, 2000)).toEqual({ asOf: null, lagMs: 1100 });
    expect(history.position(200n, 2000)).toEqual({ asOf: 900, lagMs: 1100 });
  });

  it('lets the replica serve reads only while healthy and within the maximum lag at the read', () => {
    expect(readState('ok', 1000, 1500, 1000)).toBe('ok');
    expect(readState('ok', 1000, 2001, 1000)).toBe('lagging');
    expect(readState('ok', null, 1000, 1000)).toBe('lagging');
    expect(readState('unavailable', 1000, 1000, 1000)).toBe('unavailable');
    expect(readState('not_a_replica', null, 1000, 1000)).toBe('not_a_replica');
  });
});
