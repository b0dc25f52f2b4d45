/**
 * Which daemon, or which database, a command acts on. In order:
 * 1. `--url URL`: that daemon's API (a write token from COVERAGE_ROLLUP_TOKEN, or the local
 *    token when the URL is the one recorded in this directory);
 * 2. `--config FILE` (or COVERAGE_ROLLUP_CONFIG): that file's database, read directly, as before;
 * 3. a running daemon recorded in the data directory (COVERAGE_ROLLUP_DATA_DIR, else
 *    ./.coverage-rollup): its API, with the token it recorded for this machine's commands;
 * 4. DATABASE_URL or REDIS_URL set: that database, read directly, on the defaults;
 * 5. the embedded data of a daemon that is not running: read directly (the command starts the
 *    embedded server for itself and stops it when done);
 * 6. none: the command says how to point it.
 * Light on purpose (node built-ins only): every command runs it before loading anything else.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { type DaemonRecord, dataDirOf, lookUpRecord } from '../support/daemon-record.js';

export interface DaemonLink {
  /** The API's base URL, without a trailing slash. */
  readonly url: string;
  /** The bearer token sent with every request, if any. */
  readonly token: string | undefined;
  /** How it was found, for messages: `--url` or the record's path. */
  readonly from: string;
  readonly record: DaemonRecord | undefined;
}

export type Where =
  | { readonly kind: 'daemon'; readonly link: DaemonLink }
  | { readonly kind: 'database' }
  | { readonly kind: 'none'; readonly why: string };

export interface LinkOptions {
  readonly url?: string | undefined;
  readonly config?: string | undefined;
}

/** A command's way to its daemon, asked for once its arguments are checked; throws NoDaemonError. */
export type LinkFinder = () => DaemonLink;

export class NoDaemonError extends Error {
  override readonly name = 'NoDaemonError';
}

export class BadUrlError extends Error {
  override readonly name = 'BadUrlError';
}

export function whereTo(
  values: LinkOptions,
  env: NodeJS.ProcessEnv = process.env,
  /** A command only a running daemon can do (`reload`): steps 2, 4 and 5 are skipped. */
  daemonOnly = false,
): Where {
  const dir = dataDirOf(env);
  if (values.url !== undefined) {
    const url = baseUrl(values.url);
    const found = lookUpRecord(dir);
    const local = found.kind === 'live' && found.record.url === url ? found.record : undefined;
    return {
      kind: 'daemon',
      link: { url, token: env.COVERAGE_ROLLUP_TOKEN || local?.token, from: '--url', record: local },
    };
  }
  if (!daemonOnly && (values.config !== undefined || env.COVERAGE_ROLLUP_CONFIG)) return { kind: 'database' };
  const found = lookUpRecord(dir);
  if (found.kind === 'live') {
    const { record } = found;
    return { kind: 'daemon', link: { url: record.url, token: record.token, from: found.path, record } };
  }
  if (!daemonOnly && (env.DATABASE_URL || env.REDIS_URL)) return { kind: 'database' };
  if (!daemonOnly && existsSync(join(dir, 'server.json'))) return { kind: 'database' };
  return {
    kind: 'none',
    why:
      found.kind === 'stale'
        ? `the daemon recorded in ${found.path} (pid ${found.pid}) is no longer running`
        : `no daemon is recorded in ${dir}`,
  };
}

/** What a command that found no daemon says: why, and the ways to point it at one. */
export function noDaemonMessage(command: string, why: string): string {
  return (
    `coverage-rollup ${command}: no coverage-rollup daemon found (${why}). Point the command at one: ` +
    'run it in the directory the daemon was started in (or export COVERAGE_ROLLUP_DATA_DIR=<its data directory>), ' +
    'give --url http://HOST:PORT (writes need COVERAGE_ROLLUP_TOKEN, one of its api_tokens), ' +
    'or read a database directly with --config FILE or DATABASE_URL=postgres://...'
  );
}

/** http(s)://host[:port][/path] without a trailing slash; anything else is refused. */
export function baseUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new BadUrlError(`--url must be the daemon's address, such as http://127.0.0.1:8080 (got ${text})`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new BadUrlError(`--url must start with http:// or https:// (got ${text})`);
  if (url.search !== '' || url.hash !== '')
    throw new BadUrlError(`--url is the daemon's address alone, without ? or # (got ${text})`);
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}
