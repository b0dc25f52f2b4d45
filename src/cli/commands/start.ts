import { startDaemon } from '../../daemon.js';
import { createLogger } from '../../log.js';
import { configFrom, type GlobalOptions } from './shared.js';

/**
 * Runs until SIGTERM or SIGINT: the first drains and exits 0, a second forces exit 1. An
 * unhandled error ends the process non-zero rather than leave it half alive. Signals are handled
 * from the start: one that arrives while the daemon is still starting (its ingest worker and lease
 * may already run) stops it as soon as it is up, rather than kill it with the lease held.
 */
export async function runStart(values: GlobalOptions): Promise<number> {
  const config = configFrom(values);
  const log = createLogger(config.log_level);
  const fatal = (kind: string) => (error: unknown) => {
    log.fatal({ err: error }, `${kind}; exiting`);
    process.exit(1);
  };
  process.on('uncaughtException', fatal('uncaught exception'));
  process.on('unhandledRejection', fatal('unhandled rejection'));

  let received: NodeJS.Signals | undefined;
  let stop: ((signal: NodeJS.Signals) => void) | undefined; // set once the daemon is up
  const onSignal = (signal: NodeJS.Signals) => {
    if (received) {
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    received = signal;
    const force = setTimeout(() => {
      log.error('shutdown did not finish in time; exiting');
      process.exit(1);
    }, config.shutdown_timeout + 5_000);
    force.unref();
    if (stop) stop(signal);
    else log.info({ signal }, 'signal while starting: shutting down once started');
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  const daemon = await startDaemon(config, log);
  return new Promise<number>((resolve) => {
    stop = (signal: NodeJS.Signals) => {
      log.info({ signal }, 'shutting down');
      daemon.stop().then(
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
    if (received) stop(received);
  });
}
