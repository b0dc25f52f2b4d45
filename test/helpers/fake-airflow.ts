import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseTimeBound } from '../../src/core/intervals/bounds.js';

/**
 * A stand-in for Airflow 3's API server, strict where the real one is:
 * - `POST /auth/token` takes exactly `{username, password}` (or, as the Keycloak auth manager
 *   does, `{grant_type: "client_credentials", client_id, client_secret}`), answers 201
 *   `{access_token}` with an HS256 JWT (`iat`, `exp` = iat + `[api_auth] jwt_expiration_time`),
 *   401 on wrong credentials and 422 on any other field;
 * - every `/api/v2` request needs `Authorization: Bearer <jwt>`: 401 when missing, forged, signed
 *   with a rotated key (`rotateKey()`) or expired by the fake's own clock (`now`), `jwtLeeway`
 *   (10 s, Airflow's `[api_auth] jwt_leeway`) after its `exp`;
 * - `POST /api/v2/dags/{dag}/dagRuns` validates `TriggerDAGRunPostBody` (extra fields forbidden,
 *   `logical_date` required, aware datetimes (`run_after` may be naive), both or neither data interval bound, 422 otherwise)
 *   and answers 409 for a second run with the same dag_run_id or the same logical date;
 * - `GET .../dagRuns/{run_id}` answers the run or 404;
 * - `GET /api/v2/dags/{dag}` answers `timetable_partitioned` (true for `partitionedDags`); a
 *   `partition_key` for a DAG that is not partitioned is a 400, as Airflow 3.2+ answers it;
 * - `POST /api/v2/dags/~/dagRuns/list` is Airflow 3's batch list (`DAGRunsBatchBody`: only `~` as
 *   the DAG, extra fields forbidden, filters by dag_ids, states and logical_date range, pages of
 *   at most 100, `{dag_runs, total_entries}`); it cannot filter by run id, as the real one cannot.
 * - `GET /api/v2/assets`, `GET|POST /api/v2/assets/events` (CreateAssetEventsBody: extra fields
 *   forbidden, `extra` gains `from_rest_api: true`; the list filters by asset and timestamp, not
 *   by extra), for the `assets` given; `runFromEvent` links a run as Airflow's scheduler would.
 * A new run is `queued`; `setState` moves it (queued, running, success, failed; back to queued is
 * what clearing it in Airflow does). `failures` are answered to dagRuns POSTs first, in order, per DAG.
 */
export interface FakeAirflowOptions {
  readonly now?: () => number;
  readonly jwtExpirationTime?: number;
  /** `[api_auth] jwt_leeway`: seconds a token is still accepted past its `exp` (Airflow's default 10). */
  readonly jwtLeeway?: number;
  readonly users?: Readonly<Record<string, string>>;
  readonly clients?: Readonly<Record<string, string>>;
  /** The body fields the server knows; Airflow 3.2+'s TriggerDAGRunPostBody by default. */
  readonly fields?: readonly string[];
  /** `[api] maximum_page_limit`: pages asked larger are cut to it, silently (default 100). */
  readonly maximumPageLimit?: number;
  /** DAGs whose timetable is partitioned (`timetable_partitioned` in GET /api/v2/dags/{dag}). */
  readonly partitionedDags?: readonly string[];
  /** Assets by name (their URI is `uri:<name>`), with ids 1, 2, ... in this order. */
  readonly assets?: readonly string[];
}

export interface AirflowAssetEvent {
  id: number;
  asset_id: number;
  name: string;
  uri: string;
  extra: Record<string, unknown>;
  partition_key: string | null;
  timestamp: string;
  source_map_index: number;
  created_dagruns: Array<{ dag_id: string; run_id: string }>;
}

export type DagRunState = 'queued' | 'running' | 'success' | 'failed';

export interface AirflowRun {
  dag_run_id: string;
  dag_id?: string;
  state?: DagRunState;
  logical_date: string;
  data_interval_start?: string;
  data_interval_end?: string;
  run_after?: string;
  conf?: unknown;
  note?: string;
  partition_key?: string | null;
}

export interface AirflowRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: Record<string, unknown>;
  readonly status: number;
}

export const TRIGGER_FIELDS = [
  'dag_run_id',
  'data_interval_start',
  'data_interval_end',
  'logical_date',
  'run_after',
  'conf',
  'note',
  'partition_key',
];

export interface FakeAirflow {
  readonly url: string;
  readonly requests: AirflowRequest[];
  readonly runs: Map<string, AirflowRun[]>;
  readonly failures: Record<string, number[]>;
  /** Every access token issued by /auth/token. */
  readonly issued: string[];
  /** A token as /auth/token would issue it, for a static `token` in a target. */
  mint(subject: string, lifetimeSeconds: number): string;
  /** Rotates the signing key ([api_auth] jwt_secret): every token issued so far answers 401. */
  rotateKey(): void;
  /** While true, every bearer token answers 401, even a fresh one. */
  refuseTokens: boolean;
  to(path: string): AirflowRequest[];
  /** Moves a dag run to a state, as the scheduler (or a clear in the UI) would. */
  setState(dag: string, runId: string, state: DagRunState): void;
  /** Deletes a dag run, as `DELETE .../dagRuns/{id}` would. */
  remove(dag: string, runId: string): void;
  /** Asset events posted (`POST /api/v2/assets/events`), in order. */
  readonly events: AirflowAssetEvent[];
  /** What Airflow's scheduler does for an event: a queued run of `dag` that consumed it. */
  runFromEvent(eventId: number, dag: string, runId: string): void;
  close(): Promise<void>;
}

/** Airflow 3's DAGRunsBatchBody fields: anything else is a 422. */
const LIST_FIELDS = new Set([
  'order_by',
  'page_offset',
  'page_limit',
  'dag_ids',
  'states',
  ...['run_after', 'logical_date', 'start_date', 'end_date'].flatMap((f) =>
    ['gte', 'gt', 'lte', 'lt'].map((op) => `${f}_${op}`),
  ),
]);
const MAX_PAGE = 100;

const instant = (iso: string) => parseTimeBound(iso, 'logical_date', 'UTC').value;
const AWARE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/;

export async function startFakeAirflow(options: FakeAirflowOptions = {}): Promise<FakeAirflow> {
  const now = options.now ?? Date.now;
  const lifetime = options.jwtExpirationTime ?? 86_400;
  const leeway = options.jwtLeeway ?? 10;
  const users = options.users ?? {};
  const clients = options.clients ?? {};
  const fields = new Set(options.fields ?? TRIGGER_FIELDS);
  const partitioned = new Set(options.partitionedDags ?? []);
  let key = randomBytes(32);
  const requests: AirflowRequest[] = [];
  const runs = new Map<string, AirflowRun[]>();
  const failures: Record<string, number[]> = {};
  const issued: string[] = [];

  const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const sign = (data: string) => createHmac('sha256', key).update(data).digest();
  function mint(subject: string, lifetimeSeconds: number): string {
    const iat = Math.floor(now() / 1000);
    const head = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64({ sub: subject, iat, nbf: iat, exp: iat + lifetimeSeconds, jti: randomUUID() })}`;
    return `${head}.${sign(head).toString('base64url')}`;
  }
  function authenticated(headers: IncomingHttpHeaders): boolean {
    const match = /^Bearer (.+)$/.exec(headers.authorization ?? '');
    const [head, claims, signature] = match?.[1]?.split('.') ?? [];
    if (!head || !claims || !signature) return false;
    const expected = sign(`${head}.${claims}`);
    const given = Buffer.from(signature, 'base64url');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return false;
    const { exp } = JSON.parse(Buffer.from(claims, 'base64url').toString()) as { exp: number };
    return now() / 1000 < exp + leeway;
  }
  const unprocessable = (loc: string, type: string, msg: string): [number, unknown] => [
    422,
    { detail: [{ type, loc: ['body', loc], msg }] },
  ];

  function token(body: Record<string, unknown>): [number, unknown] {
    const allowed =
      body.grant_type === 'client_credentials'
        ? ['grant_type', 'client_id', 'client_secret']
        : ['username', 'password'];
    for (const field of Object.keys(body))
      if (!allowed.includes(field))
        return unprocessable(field, 'extra_forbidden', 'Extra inputs are not permitted');
    for (const field of allowed)
      if (typeof body[field] !== 'string') return unprocessable(field, 'missing', 'Field required');
    const ok =
      body.grant_type === 'client_credentials'
        ? clients[body.client_id as string] === body.client_secret
        : users[body.username as string] === body.password;
    if (!ok) return [401, { detail: 'Invalid credentials' }];
    const jwt = mint(String(body.username ?? body.client_id), lifetime);
    issued.push(jwt);
    return [201, { access_token: jwt }];
  }

  function listRuns(dag: string, body: Record<string, unknown>): [number, unknown] {
    if (dag !== '~')
      return [
        422,
        { detail: [{ type: 'literal_error', loc: ['path', 'dag_id'], msg: "Input should be '~'" }] },
      ];
    for (const field of Object.keys(body))
      if (!LIST_FIELDS.has(field))
        return unprocessable(field, 'extra_forbidden', 'Extra inputs are not permitted');
    const dagIds = body.dag_ids as string[] | undefined;
    const states = body.states as string[] | undefined;
    const gte = body.logical_date_gte === undefined ? -Infinity : instant(String(body.logical_date_gte));
    const lte = body.logical_date_lte === undefined ? Infinity : instant(String(body.logical_date_lte));
    const all = [...runs.entries()]
      .filter(([id]) => dagIds === undefined || dagIds.includes(id))
      .flatMap(([id, list]) => list.map((r) => ({ ...r, dag_id: id, state: r.state ?? 'queued' })))
      .filter((r) => states === undefined || states.includes(r.state))
      .filter((r) => instant(r.logical_date) >= gte && instant(r.logical_date) <= lte)
      .sort((a, b) => instant(a.logical_date) - instant(b.logical_date));
    const offset = Number(body.page_offset ?? 0);
    const max = options.maximumPageLimit ?? MAX_PAGE;
    const limit = Math.min(Number(body.page_limit ?? max), max);
    return [200, { dag_runs: all.slice(offset, offset + limit), total_entries: all.length }];
  }

  function dagRuns(method: string, dag: string, runId: string | undefined, body: Record<string, unknown>) {
    if (method === 'POST' && runId === 'list') return listRuns(dag, body);
    const list = runs.get(dag) ?? [];
    runs.set(dag, list);
    if (method === 'GET') {
      const run = list.find((r) => r.dag_run_id === runId);
      return run ? [200, run] : [404, { detail: 'The DagRun was not found' }];
    }
    for (const field of Object.keys(body))
      if (!fields.has(field))
        return unprocessable(field, 'extra_forbidden', 'Extra inputs are not permitted');
    if (!('logical_date' in body)) return unprocessable('logical_date', 'missing', 'Field required');
    // run_after is a plain datetime in Airflow (naive accepted); the others must be aware.
    for (const field of ['logical_date', 'data_interval_start', 'data_interval_end']) {
      const value = body[field];
      if (value !== undefined && value !== null && !(typeof value === 'string' && AWARE.test(value)))
        return unprocessable(field, 'timezone_aware', 'Input should have timezone info');
    }
    if ((body.data_interval_start == null) !== (body.data_interval_end == null))
      return unprocessable(
        'data_interval_end',
        'value_error',
        'Either both data_interval_start and data_interval_end must be provided or both must be None',
      );
    if (body.conf != null && (typeof body.conf !== 'object' || Array.isArray(body.conf)))
      return unprocessable('conf', 'dict_type', 'Input should be a valid dictionary');
    if (body.partition_key != null && !partitioned.has(dag))
      return [400, { detail: `Dag '${dag}' is not a partitioned Dag and does not accept a partition_key.` }];
    const failure = failures[dag]?.shift();
    if (failure !== undefined) return [failure, { detail: 'boom' }];
    const run = body as unknown as AirflowRun;
    if (
      list.some(
        (r) => r.dag_run_id === run.dag_run_id || instant(r.logical_date) === instant(run.logical_date),
      )
    )
      return [409, { detail: 'Unique constraint violation' }];
    const created = { ...run, dag_id: dag, state: 'queued' as const };
    list.push(created);
    return [200, created];
  }

  const assetList = (options.assets ?? []).map((name, i) => ({ id: i + 1, name, uri: `uri:${name}` }));
  const events: AirflowAssetEvent[] = [];
  const EVENT_FIELDS = new Set(['asset_id', 'partition_key', 'extra', 'access_control']);

  /** `GET /api/v2/assets` (name_pattern / uri_pattern: contains), events list and create. */
  function assets(method: string, url: URL, body: Record<string, unknown>): [number, unknown] {
    const q = url.searchParams;
    const max = options.maximumPageLimit ?? MAX_PAGE;
    const limit = Math.min(Number(q.get('limit') ?? 50), max);
    const offset = Number(q.get('offset') ?? 0);
    if (url.pathname === '/api/v2/assets' && method === 'GET') {
      const name = q.get('name_pattern');
      const uri = q.get('uri_pattern');
      const found = assetList.filter(
        (a) => (name === null || a.name.includes(name)) && (uri === null || a.uri.includes(uri)),
      );
      return [200, { assets: found.slice(offset, offset + limit), total_entries: found.length }];
    }
    if (method === 'GET') {
      const id = q.get('asset_id');
      const since = q.get('timestamp_gte');
      const found = events
        .filter((e) => id === null || e.asset_id === Number(id))
        .filter((e) => since === null || Date.parse(e.timestamp) >= Date.parse(since))
        .sort((a, b) => (q.get('order_by') === '-timestamp' ? b.id - a.id : a.id - b.id));
      return [200, { asset_events: found.slice(offset, offset + limit), total_entries: found.length }];
    }
    for (const field of Object.keys(body))
      if (!EVENT_FIELDS.has(field))
        return unprocessable(field, 'extra_forbidden', 'Extra inputs are not permitted');
    if (!Number.isInteger(body.asset_id))
      return unprocessable('asset_id', 'int_type', 'Input should be a valid integer');
    const asset = assetList.find((a) => a.id === body.asset_id);
    if (!asset) return [404, { detail: `Asset with ID: \`${String(body.asset_id)}\` was not found` }];
    const event: AirflowAssetEvent = {
      id: events.length + 1,
      asset_id: asset.id,
      name: asset.name,
      uri: asset.uri,
      extra: { ...((body.extra as Record<string, unknown> | undefined) ?? {}), from_rest_api: true },
      partition_key: (body.partition_key as string | undefined) ?? null,
      timestamp: new Date(now()).toISOString(),
      source_map_index: -1,
      created_dagruns: [],
    };
    events.push(event);
    return [200, event];
  }

  function route(method: string, path: string, headers: IncomingHttpHeaders, body: Record<string, unknown>) {
    if (path === '/auth/token' && method === 'POST') return token(body);
    const url = new URL(path, 'http://fake');
    if (url.pathname === '/api/v2/assets' || url.pathname === '/api/v2/assets/events') {
      if (fake.refuseTokens || !authenticated(headers)) return [401, { detail: 'Invalid JWT token' }];
      return assets(method, url, body);
    }
    const dagMatch = /^\/api\/v2\/dags\/([^/~]+)$/.exec(path);
    if (dagMatch && method === 'GET') {
      if (fake.refuseTokens || !authenticated(headers)) return [401, { detail: 'Invalid JWT token' }];
      const dagId = decodeURIComponent(dagMatch[1]!);
      return [200, { dag_id: dagId, is_paused: false, timetable_partitioned: partitioned.has(dagId) }];
    }
    const match = /^\/api\/v2\/dags\/([^/]+)\/dagRuns(?:\/([^/]+))?$/.exec(path);
    if (!match) return [404, { detail: 'Not Found' }];
    if (fake.refuseTokens || !authenticated(headers)) return [401, { detail: 'Invalid JWT token' }];
    const runId = match[2] === undefined ? undefined : decodeURIComponent(match[2]);
    return dagRuns(method, decodeURIComponent(match[1]!), runId, body);
  }

  const server = createServer((req, res) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      text += chunk;
    });
    req.on('end', () => {
      const method = req.method ?? '';
      const path = req.url ?? '';
      const body = JSON.parse(text || '{}') as Record<string, unknown>;
      const [status, answer] = route(method, path, req.headers, body) as [number, unknown];
      requests.push({ method, path, headers: req.headers, body, status });
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const fake: FakeAirflow = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    refuseTokens: false,
    requests,
    runs,
    failures,
    issued,
    mint,
    rotateKey: () => {
      key = randomBytes(32);
    },
    to: (path) => requests.filter((r) => r.path === path),
    events,
    runFromEvent: (eventId, dag, runId) => {
      const event = events.find((e) => e.id === eventId);
      if (!event) throw new Error(`fake airflow: no asset event ${eventId}`);
      event.created_dagruns.push({ dag_id: dag, run_id: runId });
      const list = runs.get(dag) ?? [];
      list.push({ dag_run_id: runId, dag_id: dag, state: 'queued', logical_date: event.timestamp });
      runs.set(dag, list);
    },
    setState: (dag, runId, state) => {
      const run = runs.get(dag)?.find((r) => r.dag_run_id === runId);
      if (!run) throw new Error(`fake airflow: no run ${runId} in ${dag}`);
      run.state = state;
    },
    remove: (dag, runId) => {
      const list = runs.get(dag) ?? [];
      runs.set(
        dag,
        list.filter((r) => r.dag_run_id !== runId),
      );
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  return fake;
}
