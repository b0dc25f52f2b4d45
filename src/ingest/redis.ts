import { Redis } from 'ioredis';

/** BullMQ needs maxRetriesPerRequest: null so blocking commands survive reconnects. */
export function redisConnection(url: string): Redis {
  return new Redis(url, { maxRetriesPerRequest: null, enableReadyCheck: true });
}
