/**
 * What a `redis_url` names: one URL for a standalone Redis, several comma-separated
 * ones for the seed nodes of a Redis Cluster. Pure, so the config schema checks it without
 * reaching into the queue layer.
 */

/** The URLs of a `redis_url`: one for a standalone Redis, several (comma-separated) for Cluster seeds. */
export function redisUrls(url: string): string[] {
  return url.split(',').map((u) => u.trim());
}

/** Several seed nodes select Redis Cluster. */
export function isClusterUrl(url: string): boolean {
  return redisUrls(url).length > 1;
}
