/**
 * The coverage question of bench:peers: "is this window covered, which gaps?" over a year of
 * 5-minute slices with a few holes, asked of a month and of the whole year.
 *
 * Airflow's task-side way (option A): list the asset's events through its REST API, merge the
 * slices and take the complement. Done as well as the API allows: pages of its largest size
 * (`[api] maximum_page_limit` raised to 10,000), the first page for the total then the rest
 * IN_FLIGHT at a time, narrowed by the only filters that apply (the asset, and the posting time:
 * the rows carry the time each slice would have been posted, its end plus 30 s, so a month's
 * question reads that month's rows and a day of margin for late posts), merged in the client
 * (Node here, faster than a Python task would). Against `GET /v1/assets/{asset}/coverage`. The
 * answers are checked equal before anything is timed.
 */
import { connect } from '../../src/store/pg/db.js';
import type { RealAirflow } from '../../test/real/helpers/airflow.js';
import { quantile, round } from '../common.js';

const FIVE_MINUTES = 5 * 60_000;
const DAY = 86_400_000;
export const YEAR = { start: Date.UTC(2025, 0, 1), end: Date.UTC(2026, 0, 1) };
export const MONTH = { start: Date.UTC(2025, 5, 1), end: Date.UTC(2025, 6, 1) };
/** Slices left out: two holes in June, three elsewhere in the year. */
const HOLES = [
  { start: Date.UTC(2025, 1, 3, 0, 0), end: Date.UTC(2025, 1, 3, 0, 5) },
  { start: Date.UTC(2025, 5, 10, 3, 10), end: Date.UTC(2025, 5, 10, 3, 15) },
  { start: Date.UTC(2025, 5, 20, 12, 0), end: Date.UTC(2025, 5, 20, 12, 15) },
  { start: Date.UTC(2025, 8, 15, 8, 30), end: Date.UTC(2025, 8, 15, 8, 40) },
  { start: Date.UTC(2025, 11, 31, 23, 55), end: Date.UTC(2026, 0, 1) },
];
const IN_FLIGHT = 4;

interface Window {
  readonly start: number;
  readonly end: number;
}
type Gap = readonly [number, number];

const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');
/** Airflow's temporal partition key form, wall-clock UTC. */
export const airflowKey = (ms: number) => new Date(ms).toISOString().slice(0, 19);

/** The year's slices, holes left out. */
export function yearSlices(): Array<{ start: number; end: number }> {
  const slices: Array<{ start: number; end: number }> = [];
  for (let t = YEAR.start; t < YEAR.end; t += FIVE_MINUTES) {
    if (HOLES.some((h) => t >= h.start && t < h.end)) continue;
    slices.push({ start: t, end: t + FIVE_MINUTES });
  }
  return slices;
}

/**
 * Writes the slices into Airflow's asset_event table as the API would have: the asset, the
 * slice in `extra`, its start as `partition_key`, posted at its end plus 30 s. Seconds, against
 * about 40 minutes through the API at the rate bench:peers measures.
 */
export async function loadAirflow(airflow: RealAirflow, assetId: number, slices: readonly Window[]) {
  const sql = connect(airflow.databaseUrl, { max: 1 });
  try {
    for (let i = 0; i < slices.length; i += 10_000) {
      const chunk = slices.slice(i, i + 10_000);
      await sql`
        insert into asset_event (asset_id, extra, partition_key, timestamp, source_map_index)
        select ${assetId}, x::json, k, t, -1
        from unnest(
          ${chunk.map((s) => JSON.stringify({ start: iso(s.start), end: iso(s.end) }))}::text[],
          ${chunk.map((s) => airflowKey(s.start))}::text[],
          ${chunk.map((s) => new Date(s.end + 30_000).toISOString())}::timestamptz[]
        ) as u(x, k, t)`;
    }
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** Merged intervals of `slices` within `window`, then the complement: the gaps. */
export function gapsOf(slices: Window[], window: Window): Gap[] {
  slices.sort((a, b) => a.start - b.start);
  const gaps: Gap[] = [];
  let covered = window.start;
  for (const s of slices) {
    if (s.end <= covered || s.start >= window.end) continue;
    if (s.start > covered) gaps.push([covered, Math.min(s.start, window.end)]);
    covered = Math.max(covered, s.end);
    if (covered >= window.end) break;
  }
  if (covered < window.end) gaps.push([covered, window.end]);
  return gaps;
}

/** Option A: the window's gaps from Airflow's event list, with how many rows and pages it read. */
export async function optionA(airflow: RealAirflow, assetId: number, window: Window, page: number) {
  const query = (offset: number) =>
    `/api/v2/assets/events?asset_id=${assetId}&timestamp_gte=${iso(window.start)}` +
    `&timestamp_lte=${iso(window.end + DAY)}&order_by=timestamp&limit=${page}&offset=${offset}`;
  const read = async (offset: number) => {
    const answer = await airflow.api('GET', query(offset));
    if (answer.status !== 200) throw new Error(`Airflow's event list: ${answer.status}`);
    return answer.body as {
      asset_events: Array<{ extra: { start: string; end: string } }>;
      total_entries: number;
    };
  };
  const first = await read(0);
  const offsets: number[] = [];
  for (let offset = page; offset < first.total_entries; offset += page) offsets.push(offset);
  const pages = [first];
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < offsets.length) pages.push(await read(offsets[next++]!));
    }),
  );
  const slices = pages.flatMap((p) =>
    p.asset_events.map((e) => ({ start: Date.parse(e.extra.start), end: Date.parse(e.extra.end) })),
  );
  return { gaps: gapsOf(slices, window), rows: slices.length, pages: pages.length };
}

/** Ours: the window's gaps from the coverage answer. */
export async function ourAnswer(url: string, token: string, asset: string, window: Window) {
  const query = new URLSearchParams({ start: iso(window.start), end: iso(window.end), limit: '1000' });
  const response = await fetch(`${url}/v1/assets/${encodeURIComponent(asset)}/coverage?${query}`, {
    headers: { authorization: `Bearer ${token}` },
  });
  const answer = (await response.json()) as {
    missing: Array<{ start: string; end: string }>;
    truncated: boolean;
  };
  if (response.status !== 200 || answer.truncated)
    throw new Error(`coverage answer: ${response.status} ${JSON.stringify(answer).slice(0, 200)}`);
  return answer.missing.map((m): Gap => [Date.parse(m.start), Date.parse(m.end)]);
}

/** Milliseconds per call of `ask` over `reps` (after one call not counted): p50 and p99. */
export async function timed(reps: number, ask: () => Promise<unknown>) {
  await ask();
  const ms: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    await ask();
    ms.push(performance.now() - t0);
  }
  ms.sort((a, b) => a - b);
  return { reps, p50_ms: round(quantile(ms, 0.5)!, 1), p99_ms: round(quantile(ms, 0.99)!, 1) };
}

export const sameGaps = (a: readonly Gap[], b: readonly Gap[]) => JSON.stringify(a) === JSON.stringify(b);
export const gapsIso = (gaps: readonly Gap[]) => gaps.map(([s, e]) => `${iso(s)}/${iso(e)}`);
