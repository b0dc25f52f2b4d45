import { defineRollups } from '../../config/rollups.js';
import { startDaemon } from '../../daemon/daemon.js';
import { resolveDatabase } from '../../embedded/resolve.js';
import { createLogger, daemonStdout } from '../../support/log.js';
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
  const rollups = defineRollups(loaded, values.config ?? process.env.COVERAGE_ROLLUP_CONFIG ?? 'defaults');
  const log = createLogger(loaded.log_level, daemonStdout());
  closeHungUpTerminalAtExit();
  let forceStopServer = () => {};
  const exitNow = (code: number) => {
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
  try {
    daemon = await startDaemon(resolved.config, log, rollups);
  } catch (error) {
    await resolved.release();
    throw error;
  }
  if (resolved.embedded) {
    log.info(
      { url: daemon.url },
      'ready; send an event: npx coverage-rollup emit --asset demo.orders --interval 2025-06-01T00:00:00Z/PT1H, ' +
        'then ask: npx coverage-rollup check demo.orders --start 2025-06-01T00:00:00Z --end 2025-06-01T01:00:00Z',
    );
  }
  return new Promise<number>((resolve) => {
    stop = (signal: NodeJS.Signals) => {
      log.info({ signal }, 'shutting down');
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
