/** Redis Cluster key rules the config schema checks and the queue groups rely on. Pure. */

/**
 * Redis Cluster's hash tag rule: the text between the first `{` and the first `}` after it, when
 * not empty, is what the key's slot is computed from.
 */
export function hasHashTag(prefix: string): boolean {
  const open = prefix.indexOf('{');
  return open >= 0 && prefix.indexOf('}', open + 1) > open + 1;
}
