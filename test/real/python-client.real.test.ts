/**
 * The coverage-rollup wheel (installed into the producers venv by tools/real/run.mjs) against the
 * built daemon on each queue backend, with three queue groups: test/real/python/client_live.py
 * announces one event and a list (time and integer assets), reads coverage back as typed answers,
 * gets the API's error codes, waits past a timeout, and holds wait_covered open while the producer
 * helper's event covers the window (the daemon's waiting call answers on the commit); the helper
 * puts assets on the queues of their groups, which the daemon consumes.
 */
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/index.js';
import { groupOf } from '../../src/core/routing.js';
import { queueGroups } from '../../src/queue/groups.js';
import { queueSchema } from '../../src/queue/schema.js';
import { packageRoot } from '../../src/support/paths.js';
import { createTestDatabase } from '../helpers/db.js';
import { REDIS_URL } from '../helpers/env.js';
import { processHarness } from '../helpers/process.js';
import { createTestPrefix } from '../helpers/redis.js';
import { lastJson, report, runPython } from './helpers/producers.js';

const procs = processHarness();
const TOKEN = 'real-python-client-token-0123456789';
const GROUPS = 3;
const SCRIPT = join(packageRoot(), 'test', 'real', 'python', 'client_live.py');

type Backend = 'redis' | 'postgres';

/** A URL with the OS user in it, as libpq-less drivers do not default to it. */
function withUser(url: string): string {
  const parsed = new URL(url);
  if (!parsed.username) parsed.username = userInfo().username;
  return parsed.toString();
}

interface Seen {
  announce: { accepted: number; committed: boolean };
  indexed: boolean;
  half: {
    covered: boolean;
    ratio: number;
    missing: string[][];
    missing_total: number;
    start_is_aware: boolean;
    versions: string[];
  };
  many: number;
  ints: { covered: boolean; missing: number[][]; ratio: number };
  errors: Record<string, string>;
  timeout: { covered: boolean; waited_s: number; missing_count: number };
  woken: { covered: boolean; ms_after_send: number; job_ids: number; early_answers: string[] };
  groups: { locations: Record<string, string>; covered: boolean[] };
  thread: boolean;
}

describe.each<Backend>(['redis', 'postgres'])('the Python client on the %s backend', (backend) => {
  it('announces, reads coverage, waits on the daemon and produces to the queue groups', async () => {
    const db = await createTestDatabase();
    const prefix = createTestPrefix();
    const raw = {
      database_url: db.url,
      redis_url: REDIS_URL,
      log_level: 'info',
      http: { host: '127.0.0.1', port: 0 },
      api_tokens: [TOKEN],
      queue: { backend, prefix, groups: GROUPS, batch_wait: 'PT0.002S' },
      shutdown_timeout: 'PT10S',
    };
    const daemon = await procs.spawn({ name: `python-client-${backend}`, config: raw });
    try {
      const broker = backend === 'redis' ? REDIS_URL : withUser(db.url);
      const run = await runPython('producers', `python-client-${backend}`, [
        SCRIPT,
        daemon.url!,
        TOKEN,
        backend,
        broker,
        prefix,
        String(GROUPS),
      ]);
      const seen = lastJson<Seen>(run.stdout);

      // POST /v1/events commits before it answers where the queue is in PostgreSQL.
      expect(seen.announce).toEqual({ accepted: 1, committed: backend === 'postgres' });
      expect(seen.indexed).toBe(true);
      expect(seen.half).toEqual({
        covered: false,
        ratio: 0.5,
        missing: [['2025-06-01T10:30:00+00:00', '2025-06-01T11:00:00+00:00']],
        missing_total: 1800,
        start_is_aware: true,
        versions: ['v1'],
      });
      expect(seen.many).toBe(6);
      expect(seen.ints).toEqual({ covered: true, missing: [[50, 60]], ratio: 0.9 });
      expect(seen.errors).toEqual({
        coverage_end_before_start: 'end_before_start',
        coverage_unknown_asset: 'unknown_asset',
        announce_end_before_start: 'invalid_events end_before_start',
        announce_other_domain: 'invalid_events domain_mismatch',
      });
      expect(seen.timeout.covered).toBe(false);
      expect(seen.timeout.missing_count).toBe(1);
      expect(seen.timeout.waited_s).toBeGreaterThanOrEqual(1.4);

      // Held open by the daemon until the helper's event was committed: no early answer, covered.
      expect(seen.woken).toMatchObject({ covered: true, job_ids: 1, early_answers: [] });
      expect(seen.woken.ms_after_send).toBeLessThan(30_000);
      const groups = queueGroups(parseConfig(raw).queue);
      for (const [asset, location] of Object.entries(seen.groups.locations)) {
        const groupPrefix = groups[groupOf(asset, GROUPS)]!.prefix;
        expect(location, asset).toBe(backend === 'redis' ? groupPrefix : queueSchema(groupPrefix));
      }
      expect(new Set(Object.values(seen.groups.locations)).size).toBeGreaterThan(1);
      expect(seen.groups.covered).toEqual([true, true, true, true, true, true]);
      expect(seen.thread).toBe(true);
      expect((await daemon.stop()).code).toBe(0);
      report(
        `Python client on ${backend}: wait_covered answered ${seen.woken.ms_after_send} ms after the ` +
          `producer helper added the covering event; 6 assets over ${GROUPS} groups indexed`,
      );
    } finally {
      await daemon.stop();
    }
  });
});
