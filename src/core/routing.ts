const utf8 = new TextEncoder();

/** FNV-1a, 32 bits, over the UTF-8 bytes of `text`, as an unsigned integer. */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  for (const byte of utf8.encode(text)) hash = Math.imul(hash ^ byte, 0x01000193);
  return hash >>> 0;
}

/**
 * The queue group an asset travels through: fnv1a32(name) modulo the number of groups. Producers
 * in other languages implement the same few lines (docs/scaling.md lists test vectors), so every path
 * puts an asset's events on the same group's queue.
 */
export function groupOf(asset: string, groups: number): number {
  if (!Number.isInteger(groups) || groups < 1) {
    throw new RangeError(`groups must be a positive integer, got ${groups}`);
  }
  return fnv1a32(asset) % groups;
}
