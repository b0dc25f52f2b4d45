/**
 * Half-open interval algebra. Every function accepts unsorted, overlapping or empty input and returns
 * a normalized set: sorted, non-empty, with overlapping and adjacent intervals merged, as fresh
 * `{start, end}` objects (callers may pass richer objects such as segments).
 */
import type { Interval } from '../types.js';

interface MutableInterval {
  start: number;
  end: number;
}

const byStart = (a: Interval, b: Interval): number => a.start - b.start || a.end - b.end;

function isSortedByStart(set: readonly Interval[]): boolean {
  for (let i = 1; i < set.length; i++) {
    if (set[i]!.start < set[i - 1]!.start) return false;
  }
  return true;
}

export function normalize(set: readonly Interval[]): Interval[] {
  // Already-sorted input (the common case: index rows come ordered) skips the sort.
  const sorted = isSortedByStart(set) ? set : [...set].sort(byStart);
  const out: MutableInterval[] = [];
  let last: MutableInterval | undefined;
  for (const { start, end } of sorted) {
    if (end <= start) continue;
    if (last !== undefined && start <= last.end) {
      if (end > last.end) last.end = end;
    } else {
      last = { start, end };
      out.push(last);
    }
  }
  return out;
}

export function union(a: readonly Interval[], b: readonly Interval[]): Interval[] {
  return normalize([...a, ...b]);
}

export function intersect(a: readonly Interval[], b: readonly Interval[]): Interval[] {
  const na = normalize(a);
  const nb = normalize(b);
  const out: Interval[] = [];
  let i = 0;
  let j = 0;
  while (i < na.length && j < nb.length) {
    const x = na[i]!;
    const y = nb[j]!;
    const start = Math.max(x.start, y.start);
    const end = Math.min(x.end, y.end);
    if (start < end) out.push({ start, end });
    if (x.end <= y.end) i++;
    else j++;
  }
  return out;
}

export function difference(a: readonly Interval[], b: readonly Interval[]): Interval[] {
  const na = normalize(a);
  const nb = normalize(b);
  const out: Interval[] = [];
  let j = 0;
  for (const x of na) {
    while (j < nb.length && nb[j]!.end <= x.start) j++;
    let cursor = x.start;
    // j stays put: nb[j] may reach into the next interval of `a`.
    for (let k = j; k < nb.length && nb[k]!.start < x.end; k++) {
      const y = nb[k]!;
      if (y.start > cursor) out.push({ start: cursor, end: y.start });
      cursor = y.end; // nb is disjoint and sorted, so this only moves forward
    }
    if (cursor < x.end) out.push({ start: cursor, end: x.end });
  }
  return out;
}

export function complement(within: Interval, set: readonly Interval[]): Interval[] {
  return difference([within], set);
}

export function measure(set: readonly Interval[]): number {
  let total = 0;
  for (const x of normalize(set)) total += x.end - x.start;
  return total;
}

export function clip(set: readonly Interval[], window: Interval): Interval[] {
  return intersect(set, [window]);
}

/** Share of `window` that `covered` covers; a zero-width window is vacuously fully covered. */
export function ratio(covered: readonly Interval[], window: Interval): number {
  const width = window.end - window.start;
  if (width <= 0) return 1;
  return measure(clip(covered, window)) / width;
}
