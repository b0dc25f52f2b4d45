/**
 * PostgreSQL as an independent oracle for the calendar: its own time-zone data (not ICU's) and its
 * own date_trunc / generate_series, compared in bulk with our periods for 2020-2030.
 *
 * For each zone one query samples every 15 minutes of UTC from 2020-01-01 to 2031-01-01 (in these
 * zones every local hh:00 and every offset change falls on that grid: offsets are whole quarter
 * hours, changes happen at whole or half UTC hours) and returns per sample t: PostgreSQL's wall
 * clock `t AT TIME ZONE zone`, `date_trunc(unit, t, zone)` for hour, day and month, and whether
 * PostgreSQL's truncated hour is an instant at which its wall clock actually shows that hour.
 * What is asserted:
 * - day and month: our period containing t starts at date_trunc(unit, t, zone), for every sample;
 *   and our periods are exactly the local midnights generate_series(local dates) AT TIME ZONE zone
 *   yields, with the same keys (to_char). No midnight is skipped or repeated in these zones, so
 *   PostgreSQL's resolution of local times is unambiguous there.
 * - hour, set of boundaries: our hour starts are exactly the samples at which PostgreSQL's wall
 *   clock shows hh:00:00 or its hour label changes (the rule calendar.ts documents); our keys are
 *   PostgreSQL's local hour, plus the offset when that wall time was already shown (the second
 *   02:00 of a fall-back night).
 * - hour, date_trunc: for units below a day date_trunc keeps the UTC offset in force at t instead
 *   of resolving the truncated local time again. Where no offset change lies between the hour
 *   start and t, that is the right answer (both repeated Berlin/New York hours included) and ours
 *   must equal it. Right after a 30-minute shift in Australia/Lord_Howe it is not: for a sample at
 *   01:45+10:30 just after the 02:00+11:00 -> 01:30+10:30 fall-back it returns 01:00 at +10:30,
 *   an instant at which the clock showed 01:30+11:00. Those samples (flagged where the wall clock
 *   at PostgreSQL's start differs from the truncated hour) must occur only in Lord_Howe, two per
 *   transition, and are covered by the wall-clock boundary assertion instead.
 */
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { type CalendarUnit, createCalendar, type Period } from '../../src/core/periods/calendar.js';

const sql = postgres(process.env.TEST_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres', {
  max: 1,
  onnotice: () => {},
});

afterAll(async () => {
  await sql.end({ timeout: 5 });
});

const ZONES = ['Europe/Berlin', 'America/New_York', 'Australia/Lord_Howe', 'Asia/Kathmandu'];
const FROM = '2020-01-01T00:00:00Z';
const TO = '2031-01-01T00:00:00Z';

interface Sample {
  t: number;
  wall: number;
  hour: number;
  hourExact: boolean;
  day: number;
  month: number;
}

async function samples(zone: string): Promise<Sample[]> {
  // Bulk transfer: the instant in epoch microseconds, everything else as int4 seconds relative to it.
  const rows = await sql<
    { t: string; wall: number; hour: number; hour_exact: boolean; day: number; month: number }[]
  >`
    select (extract(epoch from t) * 1000000)::bigint as t,
           extract(epoch from (t at time zone ${zone}) - (t at time zone 'UTC'))::int4 as wall,
           extract(epoch from t - date_trunc('hour', t, ${zone}))::int4 as hour,
           date_trunc('hour', t, ${zone}) at time zone ${zone} = date_trunc('hour', t at time zone ${zone})
             as hour_exact,
           extract(epoch from t - date_trunc('day', t, ${zone}))::int4 as day,
           extract(epoch from t - date_trunc('month', t, ${zone}))::int4 as month
      from generate_series(${FROM}::timestamptz, ${TO}::timestamptz, interval '15 minutes') as t
     order by t`;
  const SECOND = 1_000_000;
  return rows.map((r) => {
    const t = Number(r.t);
    return {
      t,
      wall: t + r.wall * SECOND,
      hour: t - r.hour * SECOND,
      hourExact: r.hour_exact,
      day: t - r.day * SECOND,
      month: t - r.month * SECOND,
    };
  });
}

/** Local midnights of 2020-01-01 .. 2031-01-01 (days or months) as PostgreSQL resolves them. */
async function localStarts(
  zone: string,
  step: '1 day' | '1 month',
): Promise<{ key: string; start: number }[]> {
  const format = step === '1 day' ? 'YYYY-MM-DD' : 'YYYY-MM';
  const rows = await sql<{ key: string; start: string }[]>`
    select to_char(d, ${format}) as key, (extract(epoch from d at time zone ${zone}) * 1000000)::bigint as start
      from generate_series('2020-01-01'::timestamp, '2031-01-01'::timestamp, ${step}::interval) as d
     order by d`;
  return rows.map((r) => ({ key: r.key, start: Number(r.start) }));
}

function periods(zone: string, unit: CalendarUnit, start: number, end: number): Period[] {
  const cal = createCalendar({ every: { kind: 'unit', unit }, timezone: zone });
  return cal.periodsOverlapping({ start, end }, 1_000_000);
}

/** Start of the period in `list` (ascending, contiguous) that contains t. */
function startContaining(list: Period[], t: number): number {
  let lo = 0;
  let hi = list.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (list[mid]!.start <= t) lo = mid;
    else hi = mid - 1;
  }
  const p = list[lo]!;
  if (!(p.start <= t && t < p.end)) throw new Error(`no period holds ${t}`);
  return p.start;
}

function offsetText(minutes: number): string {
  const abs = Math.abs(minutes);
  return `${minutes < 0 ? '-' : '+'}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
}

describe.each(ZONES)('calendar vs PostgreSQL in %s', (zone) => {
  it('days, months and hours of 2020-2030 agree', async () => {
    const [grid, days, months] = await Promise.all([
      samples(zone),
      localStarts(zone, '1 day'),
      localStarts(zone, '1 month'),
    ]);
    const first = grid[0]!.t;
    const last = grid[grid.length - 1]!.t;

    // Days and months: exactly PostgreSQL's local midnights, with its keys.
    for (const [unit, expected] of [
      ['day', days],
      ['month', months],
    ] as const) {
      const ours = periods(zone, unit, expected[0]!.start, expected[expected.length - 1]!.start);
      expect(ours.length).toBe(expected.length - 1);
      const mismatches = ours.flatMap((p, i) =>
        p.key === expected[i]!.key && p.start === expected[i]!.start && p.end === expected[i + 1]!.start
          ? []
          : [{ ours: p, postgres: expected[i] }],
      );
      expect(mismatches.slice(0, 5)).toEqual([]);
    }

    // Per sample: date_trunc(day|month|hour, t, zone).
    const ourDays = periods(zone, 'day', first, last + 1);
    const ourMonths = periods(zone, 'month', first, last + 1);
    const ourHours = periods(zone, 'hour', first, last + 1);
    const bad: unknown[] = [];
    const inexact: Sample[] = [];
    for (const s of grid) {
      if (startContaining(ourDays, s.t) !== s.day) bad.push({ unit: 'day', ...s });
      if (startContaining(ourMonths, s.t) !== s.month) bad.push({ unit: 'month', ...s });
      if (!s.hourExact) inexact.push(s);
      else if (startContaining(ourHours, s.t) !== s.hour) bad.push({ unit: 'hour', ...s });
    }
    expect(bad.slice(0, 5)).toEqual([]);
    if (zone === 'Australia/Lord_Howe') {
      // Two samples (30 minutes) after each of the 22 transitions of 2020-2030.
      expect(inexact.length).toBe(44);
      for (const s of inexact) expect(s.t - s.hour).toBeLessThanOrEqual(75 * 60_000_000);
    } else {
      expect(inexact).toEqual([]);
    }

    // Hour boundaries and keys from PostgreSQL's wall clock.
    const seen = new Set<number>();
    const expected: { start: number; key: string }[] = [];
    let previousLabel: number | undefined;
    for (const s of grid) {
      const label = Math.floor(s.wall / 3_600_000_000) * 3_600_000_000;
      const boundary = label === s.wall || (previousLabel !== undefined && label !== previousLabel);
      if (boundary && s.t > first) {
        const repeated = seen.has(s.wall);
        const key = new Date(label / 1000).toISOString().slice(0, 13);
        expected.push({ start: s.t, key: repeated ? key + offsetText((s.wall - s.t) / 60_000_000) : key });
      }
      seen.add(s.wall);
      previousLabel = label;
    }
    const actual = ourHours.filter((p) => p.start > first).map((p) => ({ start: p.start, key: p.key }));
    expect(actual.length).toBe(expected.length);
    const hourMismatches = actual.flatMap((p, i) =>
      p.start === expected[i]!.start && p.key === expected[i]!.key
        ? []
        : [{ ours: p, postgres: expected[i] }],
    );
    expect(hourMismatches.slice(0, 5)).toEqual([]);
    // Sanity: the zones do have DST (or not) as expected.
    const lengths = new Set(ourDays.map((d) => (d.end - d.start) / 60_000_000));
    expect([...lengths].sort((a, b) => a - b)).toEqual(
      {
        'Europe/Berlin': [1380, 1440, 1500],
        'America/New_York': [1380, 1440, 1500],
        'Australia/Lord_Howe': [1410, 1440, 1470],
        'Asia/Kathmandu': [1440],
      }[zone],
    );
  });
});
