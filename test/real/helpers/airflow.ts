import { randomBytes } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { connectOnce } from '../../../src/store/pg/db.js';
import { ADMIN_URL, databaseUrl, uniqueName } from '../../helpers/env.js';
import { freePort } from '../../helpers/ports.js';
import { waitFor } from '../../helpers/wait.js';
import { REAL_ARTIFACTS, SystemProcess, venvBin, waitForHttp } from './system.js';

/**
 * A real Apache Airflow 3.3 for one test file, from the venv `npm run test:real`
 * installs: AIRFLOW_HOME in a temp dir, a PostgreSQL metadata database of its own (created here,
 * dropped by stop()), `airflow db migrate`, then the api-server (127.0.0.1, a free port, one
 * worker), scheduler (LocalExecutor), dag-processor and triggerer, each a process group of its own
 * logged to test-artifacts/real/<name>-<component>.log. The SimpleAuthManager reads a users entry
 * and a passwords file written here; `[api_auth] jwt_expiration_time` is short when a suite asks.
 * Resolves once the API answers and every DAG in `dags` is parsed and unpaused.
 */

// biome-ignore lint/suspicious/noExplicitAny: Airflow's answers are read as untyped JSON
export type Json = Record<string, any>;

export interface AirflowOptions {
  /** A label for log files, unique per file. */
  readonly name: string;
  /** DAG files copied into the suite's own DAGs folder. */
  readonly dagFiles: readonly string[];
  /** The DAG ids that must be parsed before start resolves. */
  readonly dagIds: readonly string[];
  /** `[api_auth] jwt_expiration_time`, seconds (Airflow's default is a day). */
  readonly jwtExpirationTime?: number;
  /** More SimpleAuthManager users besides the suite's admin, by name: their role (`user`, `op`, ...). */
  readonly users?: Readonly<Record<string, string>>;
  /** More `AIRFLOW__SECTION__KEY` settings. */
  readonly env?: Readonly<Record<string, string>>;
}

export interface RealAirflow {
  readonly url: string;
  readonly username: string;
  readonly password: string;
  /** The passwords of `users`, by name. */
  readonly passwords: Readonly<Record<string, string>>;
  readonly home: string;
  /** Its metadata database (bench:peers writes asset events there, as rows of Airflow's shape). */
  readonly databaseUrl: string;
  readonly processes: readonly SystemProcess[];
  /** A JWT from `POST /auth/token`, fetched anew when half its life is gone. */
  token(): Promise<string>;
  /** An authenticated request to the API; answers status and parsed JSON (or text). */
  api(method: string, path: string, body?: unknown): Promise<{ status: number; body: Json }>;
  /** What the api-server logged since this start (its uvicorn access log included). */
  accessLog(): Promise<string>;
  /** Stops every process by pid (the whole group of each) and drops the database. */
  stop(): Promise<void>;
}

export const AIRFLOW_USER = 'coverage';

export async function startAirflow(options: AirflowOptions): Promise<RealAirflow> {
  const airflow = venvBin('airflow', 'airflow');
  const home = mkdtempSync(join(tmpdir(), 'coverage-rollup-airflow-'));
  const dags = join(home, 'dags');
  mkdirSync(dags);
  for (const file of options.dagFiles) copyFileSync(file, join(dags, basename(file)));
  const password = randomBytes(12).toString('hex');
  const others = Object.fromEntries(
    Object.keys(options.users ?? {}).map((name) => [name, randomBytes(12).toString('hex')]),
  );
  const passwords = join(home, 'passwords.json');
  writeFileSync(passwords, JSON.stringify({ ...others, [AIRFLOW_USER]: password }));
  const userList = [
    `${AIRFLOW_USER}:admin`,
    ...Object.entries(options.users ?? {}).map(([name, role]) => `${name}:${role}`),
  ].join(',');

  const dbName = uniqueName('cr_airflow');
  const admin = connectOnce(ADMIN_URL);
  await admin`create database ${admin(dbName)}`;
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const sqlUrl = databaseUrl(dbName).replace(/^postgres(ql)?:\/\//, 'postgresql+psycopg2://');
  const env: Record<string, string> = {
    AIRFLOW_HOME: home,
    AIRFLOW__DATABASE__SQL_ALCHEMY_CONN: sqlUrl,
    AIRFLOW__CORE__EXECUTOR: 'LocalExecutor',
    AIRFLOW__CORE__PARALLELISM: '4',
    AIRFLOW__CORE__LOAD_EXAMPLES: 'False',
    AIRFLOW__CORE__DAGS_FOLDER: dags,
    AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION: 'False',
    AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS: userList,
    AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE: passwords,
    AIRFLOW__CORE__EXECUTION_API_SERVER_URL: `${url}/execution/`,
    AIRFLOW__API__BASE_URL: url,
    AIRFLOW__API__HOST: '127.0.0.1',
    AIRFLOW__API__PORT: String(port),
    AIRFLOW__API__WORKERS: '1',
    AIRFLOW__API__SECRET_KEY: randomBytes(16).toString('hex'),
    AIRFLOW__API_AUTH__JWT_SECRET: randomBytes(32).toString('hex'),
    AIRFLOW__API_AUTH__JWT_EXPIRATION_TIME: String(options.jwtExpirationTime ?? 86_400),
    AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL: '2',
    AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL: '10',
    AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME: '0.5',
    AIRFLOW__TRIGGERER__CAPACITY: '50',
    AIRFLOW__LOGGING__BASE_LOG_FOLDER: join(home, 'logs'),
    // On a loaded 2-core machine the api-server may answer a task's execution-API call after
    // Airflow's 5 s default: the task then fails for no reason of its own.
    AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT: '60',
    AIRFLOW__WORKERS__EXECUTION_API_RETRIES: '10',
    // The api-server's pool (5 + 10 by default) ran dry under the task workers and our polls.
    AIRFLOW__DATABASE__SQL_ALCHEMY_POOL_SIZE: '10',
    AIRFLOW__DATABASE__SQL_ALCHEMY_MAX_OVERFLOW: '20',
    PYTHONUNBUFFERED: '1',
    ...options.env,
  };
  const processes: SystemProcess[] = [];
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await Promise.all(processes.map((p) => p.stop(20_000)));
    try {
      await admin`drop database if exists ${admin(dbName)} with (force)`;
    } finally {
      await admin.end();
      rmSync(home, { recursive: true, force: true });
    }
  };
  const start = (component: string, args: string[]) => {
    const p = new SystemProcess({
      name: `${options.name}-${component}`,
      command: airflow,
      args,
      env,
      cwd: home,
    });
    processes.push(p);
    return p;
  };

  let jwt: { value: string; renewAt: number } | undefined;
  const token = async () => {
    if (jwt && Date.now() < jwt.renewAt) return jwt.value;
    const response = await fetch(`${url}/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ username: AIRFLOW_USER, password }),
    });
    const text = await response.text();
    if (response.status !== 201) throw new Error(`POST /auth/token: ${response.status} ${text}`);
    const value = (JSON.parse(text) as { access_token: string }).access_token;
    jwt = { value, renewAt: Date.now() + ((options.jwtExpirationTime ?? 86_400) * 1000) / 2 };
    return value;
  };
  const api = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${await token()}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await response.text();
    let parsed: Json;
    try {
      parsed = JSON.parse(text) as Json;
    } catch {
      parsed = { text };
    }
    return { status: response.status, body: parsed };
  };

  let apiLog = '';
  let apiLogStart = 0;
  try {
    const migrate = start('migrate', ['db', 'migrate']);
    await migrate.exited;
    if (migrate.exitCode !== 0)
      throw new Error(`airflow db migrate exited ${migrate.exitCode}: see ${migrate.logPath}`);
    apiLog = join(REAL_ARTIFACTS, `${options.name}-api-server.log`);
    apiLogStart = existsSync(apiLog) ? statSync(apiLog).size : 0;
    const apiServer = start('api-server', [
      'api-server',
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--workers',
      '1',
    ]);
    // --skip-serve-logs: Airflow's log server binds every interface (host hard-coded) on a fixed port;
    // the api-server reads the task logs from the shared AIRFLOW_HOME instead.
    const others = [
      start('scheduler', ['scheduler', '--skip-serve-logs']),
      start('dag-processor', ['dag-processor']),
      start('triggerer', ['triggerer', '--skip-serve-logs']),
    ];
    await waitForHttp(`${url}/api/v2/monitor/health`, 180_000, apiServer);
    await waitFor(
      async () => {
        for (const p of others) if (!p.running) throw new Error(`${p.name} exited: see ${p.logPath}`);
        for (const id of options.dagIds) {
          const dag = await api('GET', `/api/v2/dags/${id}`);
          if (dag.status !== 200 || dag.body.is_paused) return false;
        }
        return true;
      },
      { timeout: 240_000, interval: 1_000, what: `Airflow to parse ${options.dagIds.join(', ')}` },
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    url,
    username: AIRFLOW_USER,
    password,
    passwords: others,
    home,
    databaseUrl: databaseUrl(dbName),
    processes,
    token,
    api,
    accessLog: async () => readFileSync(apiLog).subarray(apiLogStart).toString('utf8'),
    stop,
  };
}
