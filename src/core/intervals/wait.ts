/**
 * `wait=` of the coverage call: how long a request may be held open for its window to become
 * covered. An ISO 8601 duration of days, hours, minutes and seconds (to the millisecond): years,
 * months and weeks are refused, since no one waits on an HTTP request for them.
 */
// The lookaheads refuse "P" and a "T" with nothing after it in the pattern itself, so the
// OpenAPI document (which states this pattern) and the parser agree on every string.
export const WAIT_PATTERN =
  /^P(?!$)(?:(\d+)D)?(?:T(?=\d)(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:[.,](\d{1,3}))?S)?)?$/;

export type ParsedWait =
  | { readonly ok: true; readonly ms: number }
  | { readonly ok: false; readonly why: string };

export function parseWait(text: string, maxMs: number): ParsedWait {
  const m = WAIT_PATTERN.exec(text);
  if (!m) {
    return {
      ok: false,
      why: `wait ${JSON.stringify(text)} is not an ISO 8601 duration such as PT30S or PT5M`,
    };
  }
  const int = (i: number) => Number(m[i] ?? 0);
  const ms =
    int(1) * 86_400_000 +
    int(2) * 3_600_000 +
    int(3) * 60_000 +
    int(4) * 1000 +
    int(5) * 10 ** (3 - (m[5]?.length ?? 3));
  if (!Number.isSafeInteger(ms) || ms > maxMs) {
    return {
      ok: false,
      why: `wait ${text} is longer than the most this daemon holds a request (${maxMs / 1000} s)`,
    };
  }
  return { ok: true, ms };
}
