/**
 * Turns `database_url: embedded` (neither a database nor a Redis URL set) into the URL
 * of the embedded server in `data_dir`, starting the server when it is not running. The daemon
 * owns the server it uses: it stops it when it exits. A one-shot command (`check`, `emit`, ...)
 * uses the daemon's server when one runs, else starts one for itself and stops it when done.
 */
import { type Config, EMBEDDED_DATABASE } from '../config/index.js';
import { ensureDatabase } from '../store/pg/db.js';
import type { Logger } from '../support/log.js';
import { isAlive } from '../support/pid.js';
import {
  type DataDir,
  dataDir,
  makeDirectory,
  readDaemonPid,
  removeDaemonPid,
  writeDaemonPid,
} from './files.js';
import { ensureServer, stopServer } from './server.js';

export interface ResolvedConfig {
  /** The config with database_url pointing at the embedded server when it was `embedded`. */
  readonly config: Config;
  /** The embedded server's address and data directory, when one is used. */
  readonly embedded?: { readonly port: number; readonly dataDir: string; readonly started: boolean };
  /** Stops the embedded server when this process is the one to stop it; otherwise nothing. */
  release(): Promise<void>;
  /** On a forced exit: asks the server to stop (fast shutdown) without waiting for it. */
  forceStop(): void;
}

export class DataDirInUseError extends Error {
  override readonly name = 'DataDirInUseError';
}

export async function resolveDatabase(
  config: Config,
  log: Logger,
  role: 'daemon' | 'command',
): Promise<ResolvedConfig> {
  if (config.database_url !== EMBEDDED_DATABASE)
    return { config, release: async () => {}, forceStop: () => {} };
  const dir = dataDir(config.data_dir);
  if (role === 'daemon') claimDaemon(dir);
  let server: Awaited<ReturnType<typeof ensureServer>>;
  try {
    server = await ensureServer(dir, log);
    await ensureDatabase(server.url, log);
  } catch (error) {
    if (role === 'daemon') removeDaemonPid(dir, process.pid);
    throw error;
  }
  const release = async () => {
    if (role === 'daemon') {
      await stopServer(server.pid, log);
      removeDaemonPid(dir, process.pid);
      log.info({ data_dir: dir.root }, 'embedded PostgreSQL stopped');
      return;
    }
    // A daemon that started meanwhile took the server over: leave it running for it.
    const daemon = readDaemonPid(dir);
    if (server.started && !(daemon !== undefined && isAlive(daemon))) await stopServer(server.pid, log);
  };
  return {
    config: { ...config, database_url: server.url },
    embedded: { port: server.port, dataDir: dir.root, started: server.started },
    release,
    forceStop: () => {
      if (role !== 'daemon') return;
      try {
        process.kill(server.pid, 'SIGINT');
      } catch {
        // already gone
      }
      removeDaemonPid(dir, process.pid);
    },
  };
}

/**
 * One daemon per data directory: a second one would lose its database when the first stops it.
 * A daemon.pid whose process is gone was left by a daemon killed with -9: taken over.
 */
function claimDaemon(dir: DataDir): void {
  const owner = readDaemonPid(dir);
  if (owner !== undefined && owner !== process.pid && isAlive(owner)) {
    throw new DataDirInUseError(
      `another coverage-rollup daemon (pid ${owner}) runs on the data directory ${dir.root}; stop it first, or give this one another data_dir (COVERAGE_ROLLUP_DATA_DIR)`,
    );
  }
  try {
    makeDirectory(dir.root, 0o755);
  } catch (error) {
    throw new Error(
      `cannot make the data directory ${dir.root} (data_dir, COVERAGE_ROLLUP_DATA_DIR): ${(error as Error).message}`,
    );
  }
  writeDaemonPid(dir, process.pid);
}
