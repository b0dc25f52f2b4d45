import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isHexId, producedAtDigits } from '../../../../src/core/events/event-row.js';
import { formatTimeFixed, parseTimeBound } from '../../../../src/core/intervals/bounds.js';

describe('the compact forms of the event log', () => {
  it('a hex id is lowercase hexadecimal digits of even length; anything else stays text', () => {
    expect(isHexId('948b3fa0e6a45bfaa4a6be8bd3744adffc5f54f6')).toBe(true);
    expect(isHexId('0042')).toBe(true);
    expect(isHexId('42')).toBe(true);
    expect(isHexId('042')).toBe(false);
    expect(isHexId('948B3FA0')).toBe(false);
    expect(isHexId('spark-batch-8812')).toBe(false);
    expect(isHexId('')).toBe(false);
    expect(isHexId('ab\n')).toBe(false);
  });

  it('produced_at in UTC with Z and 0-6 digits is an instant and its digit count', () => {
    expect(producedAtDigits('2025-01-01T00:05:07Z')).toBe(0);
    expect(producedAtDigits('2025-01-01T00:05:07.000Z')).toBe(3);
    expect(producedAtDigits('2025-01-01T00:05:07.120Z')).toBe(3);
    expect(producedAtDigits('2025-01-01T00:05:07.12Z')).toBe(2);
    expect(producedAtDigits('2025-01-01T00:05:07.000000Z')).toBe(6);
    expect(producedAtDigits('2025-01-01T00:05:07.123456Z')).toBe(6);
    expect(producedAtDigits('2024-02-29T00:00:00Z')).toBe(0);
    expect(producedAtDigits('2000-02-29T23:59:59.9Z')).toBe(1);
    expect(producedAtDigits('2025-12-31T23:59:59Z')).toBe(0);
  });

  it('any other spelling of produced_at stays text', () => {
    for (const text of [
      '2025-01-01T00:05:07+00:00',
      '2025-01-01T00:05:07z',
      '2025-01-01 00:05:07Z',
      '2025-01-01T00:05:07.1234567Z',
      '2025-01-01T00:05:07.123000000Z',
      '2025-01-01T00:05Z',
      '2025-01-01',
      '2025-01-01T00:05:07',
      '2025-01-01T24:00:00Z',
      '2025-02-30T00:00:00Z',
      '2025-02-29T00:00:00Z',
      '2100-02-29T00:00:00Z',
      '2025-04-31T00:00:00Z',
      '0000-01-01T00:00:00Z',
      '2025-01-01T00:05:07,5Z',
    ]) {
      expect(producedAtDigits(text), text).toBeNull();
    }
  });

  it('the instant and digit count spell the text back exactly', () => {
    const instants = fc.integer({ min: Date.UTC(1700, 0, 1) * 1000, max: Date.UTC(2250, 0, 1) * 1000 });
    fc.assert(
      fc.property(instants, fc.integer({ min: 0, max: 6 }), (value, digits) => {
        const text = formatTimeFixed(value, digits);
        const kept = producedAtDigits(text);
        expect(kept).toBe(digits);
        const instant = parseTimeBound(text, 'produced_at', 'UTC').value;
        expect(formatTimeFixed(instant, kept!)).toBe(text);
      }),
    );
  });

  it('formatTimeFixed writes Date#toISOString at 3 digits', () => {
    fc.assert(
      fc.property(fc.integer({ min: Date.UTC(1700, 0, 1), max: Date.UTC(2250, 0, 1) }), (ms) => {
        expect(formatTimeFixed(ms * 1000, 3)).toBe(new Date(ms).toISOString());
      }),
    );
  });
});
