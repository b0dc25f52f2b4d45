/**
 * The demo's simulated streaming producer: a Berlin day of 5-minute micro-batches for two assets
 * with drifting boundaries, a 15-minute hole in orders that is filled late, and one hour of orders
 * reprocessed at a new version as a single event.
 */
export interface DemoEvent {
  readonly asset: string;
  readonly start: string;
  readonly end: string;
  readonly version: string;
  readonly id: string;
}

const DAY_START = Date.parse('2025-05-31T22:00:00Z'); // 2025-06-01T00:00 in Europe/Berlin
const MINUTE = 60_000;
export const HOLE = { start: DAY_START + 13 * 60 * MINUTE, end: DAY_START + 13 * 60 * MINUTE + 15 * MINUTE };
export const REPROCESSED_HOUR = { start: DAY_START + 15 * 60 * MINUTE, end: DAY_START + 16 * 60 * MINUTE };

const iso = (ms: number) => new Date(ms).toISOString();

/** Contiguous batches whose boundaries drift around the 5-minute grid (a seeded walk, reproducible). */
function batches(asset: string, seed: number): DemoEvent[] {
  const events: DemoEvent[] = [];
  let state = seed;
  const jitter = () => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return Math.round(((state / 2 ** 31) * 2 - 1) * 40) * 1000; // ±40 s
  };
  let start = DAY_START;
  for (let i = 1; start < DAY_START + 24 * 60 * MINUTE; i++) {
    const grid = DAY_START + i * 5 * MINUTE;
    const end = Math.min(i % 12 === 0 ? grid : grid + jitter(), DAY_START + 24 * 60 * MINUTE);
    events.push({ asset, start: iso(start), end: iso(end), version: 'v1', id: `${asset}-batch-${i}` });
    start = end;
  }
  return events;
}

/** Splits an event around the hole: the part inside the hole arrives late. */
function withHole(events: DemoEvent[]): { onTime: DemoEvent[]; late: DemoEvent[] } {
  const onTime: DemoEvent[] = [];
  const late: DemoEvent[] = [];
  for (const e of events) {
    const s = Date.parse(e.start);
    const t = Date.parse(e.end);
    if (t <= HOLE.start || s >= HOLE.end) {
      onTime.push(e);
      continue;
    }
    if (s < HOLE.start) onTime.push({ ...e, end: iso(HOLE.start), id: `${e.id}-a` });
    late.push({
      ...e,
      start: iso(Math.max(s, HOLE.start)),
      end: iso(Math.min(t, HOLE.end)),
      id: `${e.id}-late`,
    });
    if (t > HOLE.end) onTime.push({ ...e, start: iso(HOLE.end), id: `${e.id}-b` });
  }
  return { onTime, late };
}

export interface DemoScript {
  /** Hour by hour, both assets interleaved, as a streaming job would emit them. */
  readonly hours: DemoEvent[][];
  readonly lateFill: DemoEvent[];
  readonly reprocess: DemoEvent;
}

export function demoScript(): DemoScript {
  const { onTime, late } = withHole(batches('demo.orders', 7));
  const payments = batches('demo.payments', 11);
  const hours: DemoEvent[][] = Array.from({ length: 24 }, () => []);
  for (const e of [...onTime, ...payments]) {
    const hour = Math.min(23, Math.floor((Date.parse(e.start) - DAY_START) / (60 * MINUTE)));
    hours[hour]!.push(e);
  }
  return {
    hours,
    lateFill: late,
    reprocess: {
      asset: 'demo.orders',
      start: iso(REPROCESSED_HOUR.start),
      end: iso(REPROCESSED_HOUR.end),
      version: 'v2',
      id: 'demo.orders-reprocess-hour-15',
    },
  };
}
