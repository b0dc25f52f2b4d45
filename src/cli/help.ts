import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../paths.js';

export function version(): string {
  const pkg = JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string };
  return `coverage-rollup ${pkg.version}`;
}

export const HELP = `coverage-rollup: coverage-based triggers over streaming interval events

Usage: coverage-rollup <command> [options]

Commands:
  start                      run the daemon: ingest the events queue, serve HTTP, and (as the
                             lease holder) evaluate rollups and trigger downstream runs
  migrate                    apply pending database migrations and exit
  check ASSET --start S --end E [--limit N] [--json]
                             is [S, E) of ASSET covered? prints covered, ratio and gaps;
                             exit 0 when covered, 1 when not, 2 on error (use it as a sensor)
  emit [--asset A --start S --end E | --interval S/E] [--data-version V] [--id ID] [--replay]
                             enqueue one event on the events queue
  emit --file F              enqueue events from a JSON-lines file (- for stdin), one per line
  status [--json]            assets, rollups and the scheduler lease at a glance
  demo [--serve]             a one-minute tour on a fresh demo database (config/demo.yaml)

Options:
  -c, --config FILE          YAML config file (default: $COVERAGE_ROLLUP_CONFIG, else built-in defaults)
  -h, --help                 this help
  -v, --version              print the version

Environment (overrides the config file):
  DATABASE_URL   PostgreSQL URL        (default postgres://127.0.0.1:5432/coverage_rollup)
  REDIS_URL      Redis URL             (default redis://127.0.0.1:6379)
  PORT           HTTP port             (default 8080)
  LOG_LEVEL      fatal..trace, silent  (default info)
  API_TOKENS     comma-separated bearer tokens allowed to write over HTTP

Examples:
  coverage-rollup start --config config/example.yaml
  coverage-rollup emit --asset warehouse.orders --start 2025-06-01T10:00:00Z --end 2025-06-01T10:05:00Z --data-version v3
  coverage-rollup check warehouse.orders --start 2025-06-01T00:00:00Z --end 2025-06-02T00:00:00Z

Documentation: README.md
`;
