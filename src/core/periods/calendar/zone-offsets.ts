/** Each zone's UTC offsets and their transitions, found by sampling Intl and memoised. */
import { IANAZone } from 'luxon';
import { DAY_MS, MINUTE_MS, utcDate, utcYear } from './wall-clock.js';

/**
 * Sampling step when looking for offset transitions. Every transition between two samples with
 * different offsets is found exactly (to the millisecond); two transitions that cancel out within
 * one step would be missed. Since 1900 the tz database has no two transitions closer than four
 * days, so two days leaves a margin.
 */
const SCAN_STEP_MS = 2 * DAY_MS;

export interface Transition {
  /** First millisecond with the new offset. */
  readonly at: number;
  readonly before: number;
  readonly after: number;
}

interface YearTable {
  readonly initial: number;
  /** Transitions in [Jan 1, next Jan 1) UTC, ascending. */
  readonly transitions: readonly Transition[];
}

/** UTC offsets of one zone in milliseconds, with its transitions, memoised per UTC year. */
export class ZoneOffsets {
  private readonly years = new Map<number, YearTable>();
  private readonly zone: IANAZone;

  constructor(readonly name: string) {
    this.zone = IANAZone.create(name);
  }

  private intl(ms: number): number {
    return Math.round(this.zone.offset(ms) * MINUTE_MS);
  }

  private table(year: number): YearTable {
    let table = this.years.get(year);
    if (!table) {
      table = this.build(year);
      this.years.set(year, table);
    }
    return table;
  }

  private build(year: number): YearTable {
    const start = utcDate(year, 0, 1);
    const end = utcDate(year + 1, 0, 1);
    const initial = this.intl(start);
    const transitions: Transition[] = [];
    const previous = this.intl(start - 1);
    if (previous !== initial) transitions.push({ at: start, before: previous, after: initial });
    let a = start;
    let oa = initial;
    while (a < end - 1) {
      const b = Math.min(a + SCAN_STEP_MS, end - 1);
      const ob = this.intl(b);
      if (ob !== oa) this.locate(a, oa, b, ob, transitions);
      a = b;
      oa = ob;
    }
    return { initial, transitions };
  }

  /** Transitions in (a, b], given offset oa at a and ob ≠ oa at b. */
  private locate(a: number, oa: number, b: number, ob: number, out: Transition[]): void {
    let lo = a;
    let hi = b;
    while (hi - lo > 1) {
      const mid = lo + Math.floor((hi - lo) / 2);
      if (this.intl(mid) === oa) lo = mid;
      else hi = mid;
    }
    const oh = this.intl(hi);
    out.push({ at: hi, before: oa, after: oh });
    if (oh !== ob) this.locate(hi, oh, b, ob, out);
  }

  at(ms: number): number {
    const table = this.table(utcYear(ms));
    let offset = table.initial;
    for (const t of table.transitions) {
      if (t.at > ms) break;
      offset = t.after;
    }
    return offset;
  }

  /** The latest transition in (lo, hi]. */
  lastIn(lo: number, hi: number): Transition | undefined {
    for (let y = utcYear(hi), first = utcYear(lo); y >= first; y--) {
      const list = this.table(y).transitions;
      for (let i = list.length - 1; i >= 0; i--) {
        const t = list[i]!;
        if (t.at <= lo) return undefined;
        if (t.at <= hi) return t;
      }
    }
    return undefined;
  }

  /** The earliest transition in (lo, hi]. */
  firstIn(lo: number, hi: number): Transition | undefined {
    for (let y = utcYear(lo), last = utcYear(hi); y <= last; y++) {
      for (const t of this.table(y).transitions) {
        if (t.at > hi) return undefined;
        if (t.at > lo) return t;
      }
    }
    return undefined;
  }
}

const zoneCache = new Map<string, ZoneOffsets>();

export function zoneOffsets(name: string): ZoneOffsets {
  let zone = zoneCache.get(name);
  if (!zone) {
    zone = new ZoneOffsets(name);
    zoneCache.set(name, zone);
  }
  return zone;
}
