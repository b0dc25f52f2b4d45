import fc from 'fast-check';
import { IANAZone } from 'luxon';
import { describe, expect, it, vi } from 'vitest';
import { BadInputError } from '../../../../src/core/errors.js';
import {
  addIsoDuration,
  domainOf,
  formatPoint,
  formatTime,
  isValidZone,
  parseBound,
  parseIntegerBound,
  parseTimeBound,
} from '../../../../src/core/intervals/bounds.js';

const micros = (iso: string) => Date.parse(iso) * 1000;
const time = (text: string, zone = 'UTC') => parseTimeBound(text, 'start', zone).value;

function reasonOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (error instanceof BadInputError) return error.reason;
    throw error;
  }
  throw new Error('expected a BadInputError');
}

describe('parseTimeBound', () => {
  it('reads every offset spelling of one instant as the same value', () => {
    const spellings = [
      '2025-06-01T10:05:00Z',
      '2025-06-01T10:05:00z',
      '2025-06-01T10:05:00+00',
      '2025-06-01T10:05:00+0000',
      '2025-06-01T10:05:00+00:00',
      '2025-06-01T10:05:00-00:00',
      '2025-06-01T10:05:00.000Z',
      '2025-06-01T10:05:00.000000+00:00',
      '2025-06-01T10:05:00,0Z',
      '2025-06-01 10:05:00Z',
      '2025-06-01T12:05:00+02',
      '2025-06-01T12:05:00+0200',
      '2025-06-01T12:05:00+02:00',
      '2025-06-01T05:35:00-04:30',
      '2025-06-01T10:05Z',
      '2025-06-01T10:05:00', // no offset: the zone (UTC)
    ];
    const values = spellings.map((s) => time(s));
    expect(new Set(values)).toEqual(new Set([micros('2025-06-01T10:05:00Z')]));
  });

  it('orders by instant, not by text', () => {
    const a = time('2025-06-01T10:00:00+02:00'); // 08:00Z
    const b = time('2025-06-01T09:30:00Z');
    expect('2025-06-01T10:00:00+02:00' > '2025-06-01T09:30:00Z').toBe(true);
    expect(a).toBeLessThan(b);
    expect(b - a).toBe(90 * 60 * 1_000_000);
    // Negative offsets and half-hour offsets.
    expect(time('2025-06-01T00:30:00-05:00')).toBeGreaterThan(time('2025-06-01T05:00:00Z'));
    expect(time('2025-06-01T10:00:00+05:30')).toBe(micros('2025-06-01T04:30:00Z'));
    expect(time('2025-06-01T00:00:00-00:30')).toBe(micros('2025-06-01T00:30:00Z'));
  });

  it('keeps fractional seconds to the microsecond and the original text', () => {
    const b = parseTimeBound(' 2025-06-01T10:05:00.123456+00:00 ', 'start', 'UTC');
    expect(b.value).toBe(micros('2025-06-01T10:05:00.123Z') + 456);
    expect(b.text).toBe('2025-06-01T10:05:00.123456+00:00');
    expect(b.domain).toBe('time');
    expect(time('2025-06-01T10:05:00.5Z')).toBe(micros('2025-06-01T10:05:00.500Z'));
    expect(time('2025-06-01T10:05:00.123456000Z')).toBe(time('2025-06-01T10:05:00.123456Z'));
    expect(reasonOf(() => time('2025-06-01T10:05:00.1234567Z'))).toBe('invalid_bound');
  });

  it('reads a timestamp without an offset in the given zone (DST-aware)', () => {
    expect(time('2025-06-01T10:00:00', 'Europe/Berlin')).toBe(micros('2025-06-01T08:00:00Z'));
    expect(time('2025-01-01T10:00:00', 'Europe/Berlin')).toBe(micros('2025-01-01T09:00:00Z'));
    expect(time('2025-06-01', 'America/New_York')).toBe(micros('2025-06-01T04:00:00Z'));
    // An explicit offset wins over the zone.
    expect(time('2025-06-01T10:00:00Z', 'Europe/Berlin')).toBe(micros('2025-06-01T10:00:00Z'));
  });

  it('refuses a local time a daylight-saving gap skips, rather than shift it', () => {
    expect(() => time('2025-03-30T02:30:00', 'Europe/Berlin')).toThrow(
      'start "2025-03-30T02:30:00" does not exist in Europe/Berlin (skipped by a daylight-saving change); give an offset',
    );
    expect(time('2025-03-30T03:00:00', 'Europe/Berlin')).toBe(micros('2025-03-30T01:00:00Z'));
    expect(time('2025-03-30T02:30:00+01:00', 'Europe/Berlin')).toBe(micros('2025-03-30T01:30:00Z'));
    // 24:00 is the next midnight, with or without an offset.
    expect(time('2025-06-01T24:00', 'Europe/Berlin')).toBe(micros('2025-06-01T22:00:00Z'));
    // A date alone is the first instant of that local day, even when midnight is skipped.
    expect(time('2024-09-08', 'America/Santiago')).toBe(micros('2024-09-08T04:00:00Z'));
    // A repeated local time takes one of its readings; an offset picks either.
    expect([micros('2025-10-26T00:30:00Z'), micros('2025-10-26T01:30:00Z')]).toContain(
      time('2025-10-26T02:30:00', 'Europe/Berlin'),
    );
  });

  it('handles instants before 1970 and the edges of the safe range', () => {
    expect(time('1969-12-31T23:59:59.999999Z')).toBe(-1);
    expect(time('1900-01-01T00:00:00Z')).toBe(micros('1900-01-01T00:00:00Z'));
    expect(time('1700-01-01T00:00:00Z')).toBe(micros('1700-01-01T00:00:00Z'));
    expect(time('2255-01-01T00:00:00Z')).toBe(micros('2255-01-01T00:00:00Z'));
    // Beyond ±2^53 µs the value would be rounded: refused, never silently shifted.
    expect(reasonOf(() => time('2300-01-01T00:00:00.000001Z'))).toBe('out_of_range');
    expect(reasonOf(() => time('9999-12-31T23:59:59Z'))).toBe('out_of_range');
    expect(reasonOf(() => time('1600-01-01T00:00:00Z'))).toBe('out_of_range');
  });

  it('says how to send a "+" offset when a URL query turned it into a space', () => {
    const message = (text: string) => {
      try {
        time(text);
      } catch (error) {
        return (error as Error).message;
      }
      return 'accepted';
    };
    expect(message('2025-06-01T12:00:00 02:00')).toContain('must be sent as %2B');
    expect(message('2025-06-01T12:00:00 0200')).toContain('must be sent as %2B');
    expect(message('yesterday 12')).not.toContain('%2B');
  });

  it('refuses what is not an ISO 8601 timestamp', () => {
    for (const bad of [
      'yesterday',
      '2025-13-01T00:00:00Z',
      '2025-02-30',
      '2025-06-01T25:00:00Z',
      '2025-06-01T10:00:00+25:00',
      '2025-06-01T10:00:00+02:75',
      '2025-06-01T10:00:00+000',
      '20250601T100000Z',
      '',
      ' ',
    ]) {
      expect(
        reasonOf(() => time(bad)),
        bad,
      ).toBe('invalid_bound');
    }
    for (const bad of [5, null, true, {}, []]) {
      expect(
        reasonOf(() => parseTimeBound(bad, 'start', 'UTC')),
        String(bad),
      ).toBe('invalid_bound');
    }
  });

  it('agrees with Date on random instants spelled with random offsets', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: Date.UTC(1800, 0, 1), max: Date.UTC(2200, 0, 1) }),
        fc.integer({ min: 0, max: 999 }),
        fc.integer({ min: -14 * 60, max: 14 * 60 }),
        fc.constantFrom('colon', 'compact', 'hours'),
        (ms, extraMicros, offsetMinutes, style) => {
          const offset = style === 'hours' ? Math.trunc(offsetMinutes / 60) * 60 : offsetMinutes;
          const local = new Date(ms + offset * 60_000).toISOString().slice(0, 23);
          const sign = offset < 0 ? '-' : '+';
          const hh = String(Math.floor(Math.abs(offset) / 60)).padStart(2, '0');
          const mm = String(Math.abs(offset) % 60).padStart(2, '0');
          const suffix = style === 'colon' ? `${hh}:${mm}` : style === 'compact' ? `${hh}${mm}` : hh;
          const text = `${local}${String(extraMicros).padStart(3, '0')}${sign}${suffix}`;
          expect(time(text)).toBe(ms * 1000 + extraMicros);
          expect(time(formatTime(ms * 1000 + extraMicros))).toBe(ms * 1000 + extraMicros);
        },
      ),
    );
  });
});

describe('parseIntegerBound', () => {
  it('accepts JSON integers and decimal strings', () => {
    expect(parseIntegerBound(42, 'start')).toEqual({ domain: 'integer', value: 42, text: '42' });
    expect(parseIntegerBound(' 42 ', 'start')).toEqual({ domain: 'integer', value: 42, text: '42' });
    expect(parseIntegerBound('-17', 'start').value).toBe(-17);
    expect(parseIntegerBound('007', 'start').value).toBe(7);
    expect(parseIntegerBound(Number.MAX_SAFE_INTEGER, 'end').value).toBe(Number.MAX_SAFE_INTEGER);
    expect(parseIntegerBound(String(Number.MIN_SAFE_INTEGER), 'end').value).toBe(Number.MIN_SAFE_INTEGER);
  });

  it('refuses unsafe integers, fractions and other types', () => {
    expect(reasonOf(() => parseIntegerBound(2 ** 53, 'start'))).toBe('out_of_range');
    expect(reasonOf(() => parseIntegerBound('9007199254740993', 'start'))).toBe('out_of_range');
    expect(reasonOf(() => parseIntegerBound('-9007199254740992', 'start'))).toBe('out_of_range');
    expect(reasonOf(() => parseIntegerBound(1e21, 'start'))).toBe('out_of_range');
    expect(reasonOf(() => parseIntegerBound(1.5, 'start'))).toBe('invalid_bound');
    expect(reasonOf(() => parseIntegerBound('1.5', 'start'))).toBe('invalid_bound');
    expect(reasonOf(() => parseIntegerBound('+5', 'start'))).toBe('invalid_bound');
    expect(reasonOf(() => parseIntegerBound('0x10', 'start'))).toBe('invalid_bound');
    expect(reasonOf(() => parseIntegerBound('1e3', 'start'))).toBe('invalid_bound');
    expect(reasonOf(() => parseIntegerBound(null, 'start'))).toBe('invalid_bound');
    expect(reasonOf(() => parseIntegerBound(true, 'start'))).toBe('invalid_bound');
    expect(reasonOf(() => parseIntegerBound('2025-06-01', 'start'))).toBe('invalid_bound');
  });
});

describe('isValidZone', () => {
  it('asks luxon (an Intl.DateTimeFormat each time) once per valid zone, and every time for an unknown one', () => {
    const asked = vi.spyOn(IANAZone, 'isValidZone');
    try {
      for (let i = 0; i < 1000; i++) expect(isValidZone('Pacific/Chatham')).toBe(true);
      expect(asked).toHaveBeenCalledTimes(1);
      expect(isValidZone('Mars/Olympus_Mons')).toBe(false);
      expect(isValidZone('Mars/Olympus_Mons')).toBe(false);
      expect(isValidZone('')).toBe(false);
      expect(asked).toHaveBeenCalledTimes(4);
    } finally {
      asked.mockRestore();
    }
  });
});

describe('domainOf', () => {
  it('tells integers from timestamps from neither', () => {
    expect(domainOf(5)).toBe('integer');
    expect(domainOf('5')).toBe('integer');
    expect(domainOf('2025-06-01')).toBe('time');
    expect(domainOf('2025-06-01T10:00:00+02')).toBe('time');
    expect(domainOf('soon')).toBeNull();
    expect(domainOf(null)).toBeNull();
    expect(domainOf({})).toBeNull();
  });
});

describe('addIsoDuration', () => {
  const start = (text: string, zone = 'UTC') => parseTimeBound(text, 'start', zone);

  it('adds exact and calendar durations', () => {
    expect(addIsoDuration(start('2025-06-01T10:05:00Z'), 'PT5M', 'UTC').value).toBe(
      micros('2025-06-01T10:10:00Z'),
    );
    expect(addIsoDuration(start('2025-06-01T10:05:00.000250Z'), 'PT1H', 'UTC').value).toBe(
      micros('2025-06-01T11:05:00Z') + 250,
    );
    expect(addIsoDuration(start('2025-01-31T00:00:00Z'), 'P1M', 'UTC').value).toBe(
      micros('2025-02-28T00:00:00Z'),
    );
    // P1D over the spring-forward night in Berlin is 23 hours; PT24H is 24.
    const night = start('2025-03-30T00:00:00', 'Europe/Berlin');
    expect(addIsoDuration(night, 'P1D', 'Europe/Berlin').value - night.value).toBe(23 * 3600 * 1e6);
    expect(addIsoDuration(night, 'PT24H', 'Europe/Berlin').value - night.value).toBe(24 * 3600 * 1e6);
    expect(addIsoDuration(start('1969-12-31T23:59:59.5Z'), 'PT1S', 'UTC').value).toBe(500_000);
  });

  it('refuses invalid, zero and negative durations and overflow', () => {
    const s = start('2025-06-01T10:05:00Z');
    expect(reasonOf(() => addIsoDuration(s, 'PT5X', 'UTC'))).toBe('invalid_duration');
    expect(reasonOf(() => addIsoDuration(s, 'P', 'UTC'))).toBe('invalid_duration');
    expect(reasonOf(() => addIsoDuration(s, 'PT0S', 'UTC'))).toBe('invalid_duration');
    expect(reasonOf(() => addIsoDuration(s, 'PT-5M', 'UTC'))).toBe('invalid_duration');
    expect(reasonOf(() => addIsoDuration(start('2255-01-01T00:00:00Z'), 'P1Y', 'UTC'))).toBe('out_of_range');
  });
});

describe('formatting', () => {
  it('formats points in the asset domain', () => {
    expect(formatTime(micros('2025-06-01T10:05:00Z'))).toBe('2025-06-01T10:05:00Z');
    expect(formatTime(micros('2025-06-01T10:05:00.120Z'))).toBe('2025-06-01T10:05:00.12Z');
    expect(formatTime(micros('2025-06-01T10:05:00Z') + 7)).toBe('2025-06-01T10:05:00.000007Z');
    expect(formatTime(-1)).toBe('1969-12-31T23:59:59.999999Z');
    expect(formatPoint('integer', 12)).toBe(12);
    expect(formatPoint('time', 0)).toBe('1970-01-01T00:00:00Z');
  });

  it('formats every supported instant as Date#toISOString does, to the microsecond', () => {
    const viaDate = (v: number) => {
      const us = ((v % 1_000_000) + 1_000_000) % 1_000_000;
      const base = new Date((v - us) / 1000).toISOString().slice(0, 19);
      return us === 0 ? `${base}Z` : `${base}.${String(us).padStart(6, '0').replace(/0+$/, '')}Z`;
    };
    const day = 86_400_000_000;
    fc.assert(
      fc.property(
        fc.oneof(
          fc.integer({ min: -Number.MAX_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }),
          // Day, month and leap-year edges, where calendar arithmetic goes wrong.
          fc
            .tuple(fc.integer({ min: -104_000, max: 104_000 }), fc.integer({ min: -2, max: 2 }))
            .map(([d, us]) => d * day + us),
        ),
        (v) => {
          expect(formatTime(v)).toBe(viaDate(v));
        },
      ),
      { numRuns: 5000 },
    );
    for (const iso of [
      '1684-07-28T00:00:00Z',
      '1900-03-01T00:00:00Z',
      '2000-02-29T23:59:59Z',
      '2255-06-05T00:00:00Z',
    ]) {
      expect(formatTime(micros(iso))).toBe(iso);
    }
  });

  it('parseBound dispatches on the domain', () => {
    expect(parseBound('12', 'integer', 'start').value).toBe(12);
    expect(parseBound('2025-06-01T10:00:00', 'time', 'start', 'Europe/Berlin').value).toBe(
      micros('2025-06-01T08:00:00Z'),
    );
    expect(reasonOf(() => parseBound('2025-06-01', 'integer', 'start'))).toBe('invalid_bound');
    expect(reasonOf(() => parseBound('12', 'time', 'start'))).toBe('invalid_bound');
  });
});
