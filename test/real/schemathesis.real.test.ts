/**
 * Schemathesis (pinned: tools/real/schemathesis/requirements.txt) against the live `/openapi.json`
 * of the built daemon: every check, positive and negative data, every phase, authenticated writes
 * included, and zero failures. It stays in the suite so the document and the server cannot drift:
 * a request the document allows must not be refused for a rule the document could have stated, one
 * it forbids must be refused, every answer must match its schema, and no request may answer 5xx.
 * What is configured, and why, is in tools/real/schemathesis/schemathesis.toml and hooks.py.
 *
 * `npm run test:api` runs this file alone. SCHEMATHESIS_SEED picks another seed (default 53, so a
 * failure reproduces); SCHEMATHESIS_MAX_EXAMPLES raises the cases per operation and phase.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/db.js';
import { REDIS_URL } from '../helpers/env.js';
import { createTestPrefix } from '../helpers/redis.js';
import { waitFor } from '../helpers/wait.js';
import { startSuiteDaemon } from './helpers/daemon.js';
import { runProgram } from './helpers/producers.js';
import { REAL_ARTIFACTS, venvBin } from './helpers/system.js';

const TOKEN = 'schemathesis-token-0123456789';
const SEED = process.env.SCHEMATHESIS_SEED ?? '53';
const MAX_EXAMPLES = process.env.SCHEMATHESIS_MAX_EXAMPLES ?? '100';
const REPORTS = join(REAL_ARTIFACTS, 'schemathesis');

/** Every check schemathesis 4.32.5 has, and the one hooks.py puts in place of the built-in one on some operations. */
const CHECKS = [
  'not_a_server_error',
  'status_code_conformance',
  'content_type_conformance',
  'response_headers_conformance',
  'response_schema_conformance',
  'negative_data_rejection',
  'positive_data_acceptance',
  'missing_required_header',
  'unsupported_method',
  'allow_header_conformance',
  'use_after_free',
  'ensure_resource_availability',
  'ignored_auth',
  'object_level_authorization',
  'positive_data_acceptance_beyond_schema',
];

const db = await createTestDatabase();
const prefix = createTestPrefix();
const dir = join(REAL_ARTIFACTS, 'schemathesis-daemon');
mkdirSync(dir, { recursive: true });
// The names schemathesis.toml's dictionaries hold: rollups, periods and the runs of covered periods.
const { daemon } = await startSuiteDaemon('schemathesis-daemon', dir, {
  database_url: db.url,
  redis_url: REDIS_URL,
  log_level: 'info',
  // A held coverage request answers within schemathesis's 10 s read timeout; longer waits are a 400
  // (hooks.py accepts it: the bound is this daemon's setting, not the document's).
  http: { host: '127.0.0.1', port: 0, max_wait: 'PT2S' },
  api_tokens: [TOKEN],
  queue: { prefix, batch_wait: 'PT0.002S' },
  assets: [{ name: 'api.offsets', domain: 'integer' }],
  rollups: [
    {
      id: 'hourly',
      upstream: ['api.orders'],
      every: 'hour',
      begin: '2025-06-01',
      target: { type: 'queue', queue: 'schemathesis-runs' },
    },
    {
      id: 'offsets',
      upstream: ['api.offsets'],
      every: 1000,
      begin: 0,
      target: { type: 'queue', queue: 'schemathesis-runs' },
    },
  ],
});
afterAll(async () => {
  const exit = await daemon.stop(20_000);
  expect(exit.code).toBe(0);
});

const api = (path: string, init: RequestInit = {}) =>
  fetch(`${daemon.url}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...init.headers },
  });

interface Scenario {
  readonly label: string;
  readonly checks: Record<string, Array<{ name: string; status: string }>>;
  readonly interactions: Record<
    string,
    { request: { method: string }; response: { status_code: number } | null }
  >;
}

/** The scenarios of the run's NDJSON report. */
function scenarios(): Scenario[] {
  const [file] = readdirSync(REPORTS).filter((f) => f.endsWith('.ndjson'));
  if (file === undefined) throw new Error(`no NDJSON report in ${REPORTS}`);
  return readFileSync(join(REPORTS, file), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { ScenarioFinished?: { recorder: Scenario } })
    .flatMap((event) => (event.ScenarioFinished ? [event.ScenarioFinished.recorder] : []));
}

describe('schemathesis against the live OpenAPI document', () => {
  it('finds no failure with every check, positive and negative data, authenticated writes included', async () => {
    const events = [
      { asset: 'api.orders', start: '2025-06-01T00:00:00Z', end: '2025-06-01T01:00:00Z', id: 'seed-1' },
      { asset: 'api.offsets', start: 0, end: 1000, id: 'seed-2' },
    ];
    const posted = await api('/v1/events', { method: 'POST', body: JSON.stringify(events) });
    expect(posted.status, await posted.text()).toBeLessThan(300);
    for (const path of ['/v1/rollups/hourly/periods/2025-06-01T00', '/v1/rollups/offsets/periods/0']) {
      await waitFor(
        async () =>
          ((await (await api(path)).json()) as { period?: { generation: number } }).period?.generation === 1,
        {
          timeout: 60_000,
          what: `${path} to be triggered`,
        },
      );
    }

    rmSync(REPORTS, { recursive: true, force: true });
    const run = await runProgram(
      venvBin('schemathesis', 'schemathesis'),
      'schemathesis',
      [
        ...[
          '--config-file',
          'tools/real/schemathesis/schemathesis.toml',
          'run',
          `${daemon.url}/openapi.json`,
        ],
        ...['--seed', SEED, '--max-examples', MAX_EXAMPLES, '--no-color'],
        ...['--report', 'ndjson', '--report-dir', REPORTS],
      ],
      // Hypothesis keeps its own files beside the run, not in the repository.
      { API_TOKEN: TOKEN, HYPOTHESIS_STORAGE_DIRECTORY: join(REPORTS, 'hypothesis') },
      1_200_000,
    );
    expect(run.stdout).toMatch(/\d+ generated, \d+ passed/);

    // Every operation ran every check, and the writes got through the token, not only refusals.
    const ran = scenarios();
    const document = (await (await api('/openapi.json')).json()) as { paths: Record<string, object> };
    const described = Object.entries(document.paths).flatMap(([path, item]) =>
      Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`),
    );
    // Schemathesis leaves out the document it was given.
    const tested = new Set(ran.map((s) => s.label).filter((l) => l !== 'Stateful tests'));
    expect([...tested].sort()).toEqual(described.filter((op) => op !== 'GET /openapi.json').sort());
    const checks = new Set(
      ran.flatMap((s) =>
        Object.values(s.checks ?? {})
          .flat()
          .map((c) => c.name),
      ),
    );
    expect([...checks].sort()).toEqual([...CHECKS].sort());
    const written = new Set(
      ran.flatMap((s) =>
        Object.values(s.interactions ?? {})
          .filter((i) => i.request.method === 'POST' && (i.response?.status_code ?? 0) < 300)
          .map(() => s.label),
      ),
    );
    for (const write of [
      'POST /v1/events',
      'POST /v1/assets/{asset}/replay-requirements',
      'POST /v1/rollups/{id}/periods/{start}/trigger',
      'POST /v1/runs',
    ])
      expect(written, write).toContain(write);
  }, 1_500_000);
});
