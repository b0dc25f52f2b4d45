import { randomBytes } from 'node:crypto';
import { resolve as absolutePath } from 'node:path';
import { defineRollups } from '../../config/rollups.js';
import { type Daemon, startDaemon } from '../../daemon/daemon.js';
import { makeDirectory } from '../../embedded/files.js';
import { type ResolvedConfig, resolveDatabase } from '../../embedded/resolve.js';
import {
  lookUpRecord,
  RECORD_FORMAT,
  recordPath,
  removeRecord,
  writeRecord,
} from '../../support/daemon-record.js';
import { createLogger, daemonDestination, type Logger, redactUrl } from '../../support/log.js';
import { boundHeapGrowth } from '../heap-growth.js';
import { closeHungUpTerminalAtExit } from '../terminal-hangup.js';
import { configFrom, type GlobalOptions } from './shared.js';

/**
 * A repeat of the first signal within this long is the same request delivered twice: a terminal's
 * Ctrl-C reaches every process of the group (npm, which forwards it, and the daemon), and
 * systemd's default KillMode signals the whole cgroup. Only a later signal, or a third, forces.
 */
export const REPEAT_GRACE_MS = 1_000;

/**
 * The signals that stop the daemon gracefully. SIGHUP is what a closed terminal or SSH session, or
 * a killed tmux, sends to the foreground process group: without a handler Node dies of it at once,
 * skipping the drain and leaving the embedded PostgreSQL (in its own session) running. A daemon
 * has no config to reload on SIGHUP (the config is read once at start), so it means stop.
 */
export const STOP_SIGNALS: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP'];

/**
 * Runs until SIGTERM, SIGINT or SIGHUP: the first drains and exits 0; a deliberate second one (more than
 * REPEAT_GRACE_MS later, or a third) forces exit 1. An unhandled error ends the process non-zero
 * rather than leave it half alive. Signals are handled from the start: one that arrives while the
 * daemon is still starting (its ingest worker and lease may already run) stops it as soon as it is
 * up, rather than kill it with the lease held. With the embedded default the daemon starts the
 * embedded PostgreSQL first and stops it last.
 */
export async function runStart(values: GlobalOptions): Promise<number> {
  boundHeapGrowth();
  const loaded = configFrom(values);
  // Built now, as the schema is checked, so a bad rollup fails before an embedded server starts
  // or a line is logged, naming the file; the daemon takes them as they are.
  const rollups = defineRollups(loaded, configPath(values) ?? 'defaults');
  const log = createLogger(loaded.log_level, daemonDestination(loaded.log_format));
  closeHungUpTerminalAtExit();
  let forceStopServer = () => {};
  let forgetRecord = () => {};
  const exitNow = (code: number) => {
    forgetRecord();
    forceStopServer();
    process.exit(code);
  };
  const fatal = (kind: string) => (error: unknown) => {
    log.fatal({ err: error }, `${kind}; exiting`);
    exitNow(1);
  };
  process.on('uncaughtException', fatal('uncaught exception'));
  process.on('unhandledRejection', fatal('unhandled rejection'));

  let first: { signal: NodeJS.Signals; at: number } | undefined;
  let repeats = 0;
  let stop: ((signal: NodeJS.Signals) => void) | undefined; // set once the daemon is up
  const onSignal = (signal: NodeJS.Signals) => {
    if (first) {
      repeats += 1;
      if (repeats >= 2 || Date.now() - first.at > REPEAT_GRACE_MS) {
        log.warn({ signal }, 'second signal: exiting now');
        exitNow(1);
      }
      log.info({ signal }, 'signal repeated at once (terminal and npm both deliver it): still draining');
      return;
    }
    first = { signal, at: Date.now() };
    const force = setTimeout(() => {
      log.error('shutdown did not finish in time; exiting');
      exitNow(1);
    }, loaded.shutdown_timeout + 5_000);
    force.unref();
    if (stop) stop(signal);
    else log.info({ signal }, 'signal while starting: shutting down once started');
  };
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);

  const resolved = await resolveDatabase(loaded, log, 'daemon');
  forceStopServer = resolved.forceStop;
  if (resolved.embedded) {
    log.info(
      {
        data_dir: resolved.embedded.dataDir,
        address: `127.0.0.1:${resolved.embedded.port}`,
        queue_backend: resolved.config.queue.backend,
      },
      resolved.embedded.started
        ? 'embedded PostgreSQL started (no DATABASE_URL or REDIS_URL set): data and queues live in the data directory'
        : 'embedded PostgreSQL was already running (left by a previous daemon): using it',
    );
  }
  let daemon: Awaited<ReturnType<typeof startDaemon>>;
  const localToken = randomBytes(24).toString('base64url');
  try {
    const path = configPath(values);
    daemon = await startDaemon(resolved.config, log, rollups, {
      localToken,
      ...(path === undefined ? {} : { configFile: { path } }),
    });
  } catch (error) {
    await resolved.release();
    throw error;
  }
  const recorded = recordDaemon(resolved, daemon, configPath(values), localToken, log);
  if (recorded) forgetRecord = () => removeRecord(resolved.config.data_dir, process.pid);
  announceReady(resolved, daemon, recorded, log);
  return new Promise<number>((resolve) => {
    stop = (signal: NodeJS.Signals) => {
      log.info({ signal }, 'shutting down');
      forgetRecord(); // from now on commands must not count on its API
      daemon
        .stop()
        .then(() => resolved.release())
        .then(
          () => {
            log.info('stopped');
            resolve(0);
          },
          (error: unknown) => {
            log.error({ err: error }, 'shutdown failed');
            resolve(1);
          },
        );
    };
    if (first) stop(first.signal);
  });
}

/** The config file the daemon was started with, if any, as --config or COVERAGE_ROLLUP_CONFIG gave it. */
function configPath(values: GlobalOptions): string | undefined {
  return values.config ?? (process.env.COVERAGE_ROLLUP_CONFIG || undefined);
}

/**
 * Writes the daemon's record (daemon.json) in its data directory, so commands and producers run
 * there find it. Not when another live daemon is recorded there (several instances started from one
 * directory against one external database: commands reach the first), nor when the directory
 * cannot be made (a read-only working directory): the record is a convenience, never a reason to
 * refuse to start. True when written.
 */
function recordDaemon(
  resolved: ResolvedConfig,
  daemon: Daemon,
  config: string | undefined,
  token: string,
  log: Logger,
): boolean {
  const { config: c } = resolved;
  const found = lookUpRecord(c.data_dir);
  if (found.kind === 'live' && found.record.pid !== process.pid) {
    log.info(
      { data_dir: c.data_dir, recorded_pid: found.record.pid },
      'another daemon is recorded in this data directory: commands run here reach that one',
    );
    return false;
  }
  const noPassword = (url: string) => {
    try {
      return new URL(url).password === '' ? url : null;
    } catch {
      return null;
    }
  };
  try {
    makeDirectory(c.data_dir, 0o755);
    writeRecord(c.data_dir, {
      format: RECORD_FORMAT,
      pid: process.pid,
      started_at: new Date().toISOString(),
      config: config === undefined ? null : absolutePath(config),
      url: localUrl(daemon),
      token,
      database: redactUrl(c.database_url),
      // The embedded server's password is in server.json beside this file already.
      database_url: resolved.embedded ? c.database_url : noPassword(c.database_url),
      redis_url: c.queue.backend === 'redis' ? noPassword(c.redis_url) : null,
      queue: {
        backend: c.queue.backend,
        name: c.queue.name,
        dead_letter: c.queue.dead_letter,
        prefix: c.queue.prefix,
        groups: c.queue.groups,
      },
    });
    return true;
  } catch (error) {
    log.warn(
      { data_dir: c.data_dir, err: error },
      'could not record this daemon in its data directory: commands run here need --url or --config',
    );
    return false;
  }
}

/**
 * Where this machine reaches the daemon's API: a wildcard address (0.0.0.0, ::) is reached on the
 * loopback address; a named one as it is.
 */
function localUrl(daemon: Daemon): string {
  const address = daemon.http.server.address();
  if (address === null || typeof address === 'string') return daemon.url;
  const host =
    address.address === '0.0.0.0' ? '127.0.0.1' : address.address === '::' ? '::1' : address.address;
  return `http://${host.includes(':') ? `[${host}]` : host}:${address.port}`;
}

/**
 * The ready line says where the daemon listens, whether the network reaches it, and how to open
 * it; with the embedded default, what to try first and how a producer elsewhere finds it.
 */
function announceReady(resolved: ResolvedConfig, daemon: Daemon, recorded: boolean, log: Logger): void {
  const url = localUrl(daemon);
  const host = resolved.config.http.host;
  const loopback = host === '127.0.0.1' || host === '::1' || host === 'localhost';
  const reach = loopback
    ? `listening on ${host} only, this machine: set http.host (HTTP_HOST) to listen on the network`
    : `listening on ${host}`;
  log.info({ url, host }, `ready: status page ${url}/ ; ${reach}`);
  if (recorded) {
    const record = recordPath(resolved.config.data_dir);
    log.info(
      { record, url },
      `commands and example producers run in ${process.cwd()} find this daemon through ${record}; from another directory: export COVERAGE_ROLLUP_DATA_DIR=${absolutePath(resolved.config.data_dir)} (or give a command --url ${url})`,
    );
  }
  if (resolved.embedded) {
    log.info(
      'try it: npx coverage-rollup emit --asset demo.orders --interval 2025-06-01T00:00:00Z/PT1H, ' +
        'then npx coverage-rollup check demo.orders --start 2025-06-01T00:00:00Z --end 2025-06-01T01:00:00Z',
    );
  }
}
