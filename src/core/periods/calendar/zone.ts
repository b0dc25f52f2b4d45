/** A time zone's wall clock: local times, formatted points and period keys. */
import { splitMicros } from './points.js';
import { DAY_MS, formatOffset, fractionText, pad, ymd } from './wall-clock.js';
import { type ZoneOffsets, zoneOffsets } from './zone-offsets.js';

/** How far back a fall-back can repeat the wall clock (the largest jumps are one day). */
const REPEAT_LOOKBACK_MS = 2 * DAY_MS;

const UTC_NAMES = new Set(
  ['UTC', 'UCT', 'GMT', 'GMT0', 'GMT+0', 'GMT-0', 'Universal', 'Zulu', 'Greenwich'].flatMap((n) => [
    n.toLowerCase(),
    `etc/${n.toLowerCase()}`,
  ]),
);

/** Time-domain helpers bound to one zone. */
export class Zone {
  readonly offsets: ZoneOffsets;
  private readonly utc: boolean;

  constructor(readonly name: string) {
    this.offsets = zoneOffsets(name);
    this.utc = UTC_NAMES.has(name.toLowerCase());
  }

  wall(ms: number): number {
    return ms + this.offsets.at(ms);
  }

  formatPoint(point: number): string {
    const [ms, sub] = splitMicros(point);
    const offset = this.offsets.at(ms);
    const d = new Date(ms + offset);
    const time = `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
    const fraction = fractionText(d.getUTCMilliseconds() * 1000 + sub);
    return `${ymd(d)}T${time}${fraction}${formatOffset(offset, this.utc)}`;
  }

  /**
   * The offset suffix when the wall clock already showed the wall time of instant `ms` before the
   * latest fall-back (the second 02:00 of a Berlin fall-back night), else ''.
   */
  repeatSuffix(ms: number): string {
    const t = this.offsets.lastIn(ms - REPEAT_LOOKBACK_MS, ms);
    if (t && t.after < t.before && ms + t.after < t.at + t.before) return formatOffset(t.after, false);
    return '';
  }

  /** Key of an ISO-duration period: local start to the minute, seconds only when non-zero. */
  durationKey(start: number): string {
    const [ms, sub] = splitMicros(start);
    const d = new Date(this.wall(ms));
    let key = `${ymd(d)}T${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}`;
    const micros = d.getUTCSeconds() * 1_000_000 + d.getUTCMilliseconds() * 1000 + sub;
    if (micros !== 0) key += `:${pad(d.getUTCSeconds())}${fractionText(micros % 1_000_000)}`;
    return key + this.repeatSuffix(ms);
  }
}
