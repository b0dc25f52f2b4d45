/** The status page on an upstream no event has named yet: a page that says so, not a 404. */
import { describe, expect, it } from 'vitest';
import { startTestDaemon, testConfig } from '../helpers/daemon.js';
import { createTestDatabase } from '../helpers/db.js';
import { createTestPrefix } from '../helpers/redis.js';

const db = await createTestDatabase();
const daemon = await startTestDaemon(
  testConfig(db, createTestPrefix(), {
    scheduler: { enabled: false },
    rollups: [
      {
        id: 'unseen_hourly',
        upstream: ['never.seen'],
        every: 'hour',
        begin: '2026-01-01',
        target: { type: 'queue', queue: 'unseen-runs' },
      },
    ],
  }),
);

describe('status page focused on an asset', () => {
  it('says an upstream was never seen and which rollups wait for it (200)', async () => {
    const response = await daemon.http.inject({ url: '/?asset=never.seen' });
    expect(response.statusCode).toBe(200);
    expect(response.body).toContain('data-asset="never.seen" data-seen="false"');
    expect(response.body).not.toContain('No assets to show');
    expect(response.body.replace(/<[^>]+>/g, '')).toContain(
      'never.seen has never been seen: no event for it has been ingested yet. Rollup unseen_hourly waits for it.',
    );
  });

  it('answers 404 for an asset nothing knows nor waits for', async () => {
    const response = await daemon.http.inject({ url: '/?asset=nobody.knows' });
    expect(response.statusCode).toBe(404);
    expect(response.body).toContain('No asset named nobody.knows has been seen.');
  });
});
