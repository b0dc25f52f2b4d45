import { startDaemon } from '../../daemon.js';
import { createLogger } from '../../log.js';
import { configFrom, type GlobalOptions } from './shared.js';

/**
 * Runs until SIGTERM or SIGINT: the first drains and exits 0, a second forces exit 1. An
 * unhandled error ends the process non-zero rather than leave it half alive.
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

  const daemon = await startDaemon(config, log);
  return new Promise<number>((resolve) => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals) => {
      if (stopping) {
        log.warn({ signal }, 'second signal: exiting now');
        process.exit(1);
      }
      stopping = true;
      log.info({ signal }, 'shutting down');
      const force = setTimeout(() => {
        log.error('shutdown did not finish in time; exiting');
        process.exit(1);
      }, config.shutdown_timeout + 5_000);
      force.unref();
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
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
}
