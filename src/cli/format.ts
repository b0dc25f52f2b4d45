/** "1 segment", "2 segments". */
export function plural(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

/**
 * A ratio for people: four decimals, never rounded to a bound it has not reached (0.99996 prints
 * 0.9999, not 1; 0.00001 prints 0.0001, not 0). JSON output keeps the exact figure.
 */
export function formatRatio(ratio: number): string {
  if (ratio <= 0 || ratio >= 1) return String(ratio);
  const rounded = Math.min(0.9999, Math.max(0.0001, Math.round(ratio * 10_000) / 10_000));
  return String(rounded);
}
