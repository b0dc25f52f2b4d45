/** Points: validation of inputs and results, and splitting microseconds into milliseconds. */
import { CalendarError } from './types.js';
import { floorMod } from './wall-clock.js';

export function checkPoint(point: number, what = 'point'): void {
  if (!Number.isSafeInteger(point)) {
    throw new CalendarError('invalid_point', `${what} must be a safe integer, got ${point}`);
  }
}

export function checkResult(value: number): number {
  if (!Number.isSafeInteger(value)) {
    throw new CalendarError('out_of_range', `period bound ${value} is outside the safe integer range`);
  }
  return value;
}

/** Split microseconds into epoch milliseconds (floor) and the microseconds left over (0..999). */
export function splitMicros(point: number): [ms: number, sub: number] {
  const sub = floorMod(point, 1000);
  return [(point - sub) / 1000, sub];
}
