import { packageVersion } from '../support/paths.js';

export function version(): string {
  return `coverage-rollup ${packageVersion()}`;
}

export const HELP = `coverage-rollup: coverage-based triggers over streaming interval events

Usage: coverage-rollup <command> [options]

Commands:
  start                      run the daemon: ingest the events queue, serve HTTP, and (as the
                             lease holder) evaluate rollups and trigger downstream runs
  migrate                    apply pending database migrations and exit
  check ASSET --start S --end E [--limit N] [--order oldest|newest] [--max-lag D] [--require-known] [--json]
                             is [S, E) of ASSET covered? prints a summary and the first gaps;
                             exit 0 when covered, 1 when not (or stale), 2 on error (use it as a sensor)
  emit [--asset A --start S --end E | --interval S/E] [--data-version V] [--id ID] [--replay]
                             ingest one event: enqueued on Redis; committed into the index when
                             the queue is in its PostgreSQL (queue.backend: postgres, the default
                             without URLs)
  emit --file F              the same for a JSON-lines file (- for stdin), one event per line
  status [--json]            assets, rollups and the scheduler lease at a glance
  prune [--dry-run] [--json] one retention pass now: drop event-log partitions past
                             retention.events, compact old delivered triggers
  retry ROLLUP --period KEY  retry one period's failed, timed-out or lost run (a new attempt)
  retry ROLLUP --failed --start S --end E
                             retry every period of [S, E) whose run failed, timed out or was lost
  repair ASSET --start S --end E [--target T] [--json]
                             ask the producer for the not-complete ranges of [S, E) (a repair
                             request by hand; the lease holder delivers and follows it)
  reload [--json]            the running daemon reads its config file's rollups again (added,
                             changed and removed ones apply within a pass; a bad file changes nothing)
  demo [--serve] [--chain] [--database NAME]  a one-minute tour on a fresh demo database (config/demo.yaml)

Options:
  -c, --config FILE          YAML config file (default: $COVERAGE_ROLLUP_CONFIG, else built-in defaults)
  -h, --help                 this help; after a command, its options and exit codes
  -v, --version              print the version

Environment (overrides the config file):
  DATABASE_URL       PostgreSQL URL        (default: with REDIS_URL unset too, an embedded PostgreSQL
                     in the data directory; else postgres://127.0.0.1:5432/coverage_rollup)
  DATABASE_READ_URL  PostgreSQL replica for coverage reads and listings (default none)
  REDIS_URL          Redis URL             (default redis://127.0.0.1:6379, used with QUEUE_BACKEND=redis)
  QUEUE_BACKEND      redis or postgres     (default redis when a Redis URL is set, else postgres)
  COVERAGE_ROLLUP_DATA_DIR  the embedded PostgreSQL's directory (default ./.coverage-rollup)
  PORT               HTTP port             (default 8080)
  HTTP_HOST          HTTP address to listen on (default 127.0.0.1 with the embedded database,
                     else 0.0.0.0)
  LOG_FORMAT         json or pretty        (default pretty at a terminal, else json)
  LOG_LEVEL          fatal..trace, silent  (default info)
  API_TOKENS         comma-separated bearer tokens allowed to write over HTTP

Examples:
  coverage-rollup start --config config/example.yaml
  coverage-rollup emit --asset warehouse.orders --start 2025-06-01T10:00:00Z --end 2025-06-01T10:05:00Z --data-version v3
  coverage-rollup check warehouse.orders --start 2025-06-01T00:00:00Z --end 2025-06-02T00:00:00Z

Documentation: README.md, and docs/cli.md for every command
`;

const CONFIG_OPTION =
  '  -c, --config FILE   YAML config file (default: $COVERAGE_ROLLUP_CONFIG, else built-in defaults)\n';

/**
 * The target types and the page that documents each. Written out rather than read from
 * targets/registry.ts, which would load zod and every target module for `--help`;
 * test/unit/targets/registry.test.ts fails when a registered type is missing here.
 */
const TARGET_TYPES_HELP = `Target types:
  queue               docs/targets/queue.md
  webhook             docs/targets/webhook.md
  airflow             docs/targets/airflow.md#the-airflow-target
  airflow_asset       docs/targets/airflow.md#the-airflow_asset-target
  dagster             docs/targets/dagster.md
`;

/** The commands that act on a daemon: which one, and how they find it. */
const DAEMON_OPTIONS = `  --url URL           act through this daemon's API (writes take COVERAGE_ROLLUP_TOKEN, one of
                      its api_tokens)
  -c, --config FILE   read and write this config's database directly instead
Without either, the daemon recorded in the data directory (./.coverage-rollup, or
COVERAGE_ROLLUP_DATA_DIR) is used through its API: run the command where the daemon was started.
`;

/** `coverage-rollup <command> --help`: what the command does, its options and its exit codes. */
export const COMMAND_HELP: Readonly<Record<string, string>> = {
  start: `Usage: coverage-rollup start [--config FILE]

Runs the daemon: ingests the events queue into the index, serves HTTP, and, while it holds the
scheduler lease, evaluates rollups and delivers triggers. Applies pending migrations first and
creates the database when it is missing and the role may.

Options:
${CONFIG_OPTION}
Signals: SIGTERM, SIGINT or SIGHUP (a closed terminal) drains in-flight work (bounded by
shutdown_timeout), releases the lease and exits 0; a second signal exits 1 at once.
Exit codes: 0 after a clean shutdown, 1 on a fatal error, 2 for a bad config or an unreachable
database at start.
`,
  migrate: `Usage: coverage-rollup migrate [--config FILE]

Applies pending migrations (under an advisory lock) and exits; creates the database when it is
missing and the role may.

Options:
${CONFIG_OPTION}
Exit codes: 0 when the schema is current, 2 on error (including a schema newer than this version).
`,
  check: `Usage: coverage-rollup check ASSET --start S --end E [--limit N] [--order oldest|newest]
                           [--max-lag D] [--require-known] [--json] [--url URL | --config FILE]

Is [S, E) of ASSET covered? Prints a summary line (covered, ratio, how many missing ranges and how
much is missing, the first and the last of them), the asset's freshness, and at most --limit
missing and replay-required ranges, read from PostgreSQL. Bounds are ISO 8601 timestamps (without
an offset: the asset's zone) or integers.

Options:
  --start S, --end E  the window, half-open; an empty window (S = E) is refused
  --limit N           most entries printed per list, 0 to 1000 (default 20; with --json 200,
                      as over HTTP)
  --order O           oldest (default for ranges) or newest: which end the lists start from
  --max-lag D         also fail when the asset is stale: its complete coverage ends more than
                      D (an ISO 8601 duration such as PT20M) before now; for an integer asset,
                      no event arrived within D
  --require-known     an asset the index does not know (never seen, not declared) is an error
                      (exit 2) rather than "not covered"
  --json              print the coverage answer as JSON (the HTTP API's shape)
${DAEMON_OPTIONS}
Exit codes: 0 covered, 1 not covered, stale with --max-lag (the reason is printed on stderr) or
the asset was never seen, 2 error (bad or empty window, usage, unknown asset with
--require-known, database unreachable). Use it as a sensor in any scheduler.
`,
  emit: `Usage: coverage-rollup emit --asset A (--start S --end E | --interval S/E) [--data-version V]
                          [--id ID] [--replay] [--url URL | --config FILE]
       coverage-rollup emit --file F [--url URL | --config FILE]

Enqueues events on the events queue, validated as the worker will (including each asset's
recorded domain, when PostgreSQL answers within 3 s); all or none. Where the queue is in the
index's own PostgreSQL (queue.backend: postgres, the embedded default), commits them straight into
the index instead, as POST /v1/events does there: validated against the index first, then
committed in transactions of 1000, so \`check\` answers with them as soon as emit exits.

Options:
  --asset A           the asset
  --start S, --end E  the interval, half-open (or --interval S/E, S/duration)
  --data-version V    the event's version (--version is refused here)
  --id ID             a stable id, so a re-send changes nothing
  --replay            a replay requirement: [S, E) must be rebuilt at --data-version
  -f, --file F        JSON lines, one event per line; - reads stdin
${DAEMON_OPTIONS}
Exit codes: 0 enqueued (or committed), 2 invalid events (nothing enqueued or committed), usage
errors, or Redis (PostgreSQL) unreachable.
`,
  status: `Usage: coverage-rollup status [--json] [--url URL | --config FILE]

Assets, the configured rollups (every period since begin counted by state, as GET /v1/rollups
counts them; last trigger, undelivered) and the scheduler lease, read from PostgreSQL.

Options:
  --json              print JSON (asset fields named as GET /v1/assets names them)
${DAEMON_OPTIONS}
Exit codes: 0, or 2 on error.
`,
  prune: `Usage: coverage-rollup prune [--dry-run] [--json] [--config FILE]

One retention pass, as the daemon runs every retention.prune_every: makes event-log partitions
ahead, drops each partition older than retention.events once every rollup's cursor has passed its
events, and compacts delivered triggers older than retention.history. One instance at a time.

Options:
  --dry-run           report what it would create, drop and compact; change nothing
  --json              print the report as JSON
${CONFIG_OPTION}
Exit codes: 0 done, 1 something past retention was held back by a scheduler cursor (or another
instance was pruning), 2 error.
`,
  retry: `Usage: coverage-rollup retry ROLLUP (--period KEY | --failed --start S --end E) [--json]
                             [--url URL | --config FILE]

Retries downstream runs by hand (docs/rollups.md): each retried period gets a new attempt of its
generation, with its own run id (<idempotency key>~aN), which the lease holder delivers at once.
Only a run that failed, timed out or was lost is retried; an open or succeeded one is left alone.

Options:
  --period KEY        the period, by its key as listings give it (2025-06-01T10, 2025-06-01, ...)
  --failed            every period starting in [--start, --end) whose current run failed,
                      timed out or was lost (bounds in the rollup's form)
  --json              print {rollup, retried: [{period, run_id, attempt} | {period, refused}]}
${DAEMON_OPTIONS}
Exit codes: 0 done (also when the window had nothing to retry), 1 the named period could not be
retried (no run yet, or its run is open or succeeded), 2 usage or runtime error.
`,
  reload: `Usage: coverage-rollup reload [--json] [--url URL]

Asks the running daemon to read its config file again (POST /v1/admin/reload; docs/rollups.md):
the file is checked first, whole, with the rollups written through the API; a bad file changes
nothing and every problem is printed. Rollups added, changed (a new calendar rebuilds their
untriggered periods) and removed take effect within one scheduler pass, on every instance (each
reads its own file). Settings besides rollups need a restart: they are listed.

Options:
  --json              print the daemon's answer: {rollups: {added, changed, removed, unchanged}, restart_required}
  --url URL           this daemon (the token from COVERAGE_ROLLUP_TOKEN, one of its api_tokens)
Without --url, the daemon recorded in the data directory (./.coverage-rollup, or
COVERAGE_ROLLUP_DATA_DIR) is asked, with the token it recorded for this machine's commands.

Exit codes: 0 reloaded, 1 the file was refused (nothing changed), 2 usage or runtime error.
`,
  repair: `Usage: coverage-rollup repair ASSET --start S --end E [--target T] [--json] [--url URL | --config FILE]

Makes a repair request by hand (docs/repairs.md), no rollup needed: the ranges of
[S, E) the index does not hold complete (missing, or replay_required with the version to rebuild
at) that no open request already asks for, at most the limit of ranges. The lease holder delivers
it as attempt 1 (idempotency key repair-<id>~a1), re-sends what is still missing at \`every\`, and
marks it repaired once the index covers it, or abandoned after its attempts. ASSET must be
known: seen by the index, declared under assets:, or read or written by a rollup. A time window
is asked for up to now at most (data after now cannot exist yet).

Options:
  --start S, --end E  the window, in the asset's form (ISO 8601, or integers)
  --target T          where to send it, as YAML or JSON, any target type (below):
                      "{type: queue, queue: backfills}",
                      '{"type": "webhook", "url": "http://127.0.0.1:9000/repair"}'; secrets only as
                      {env: NAME}. Default: the repair target of a rollup reading ASSET (with its
                      every, attempts and limit), else of any rollup
  --json              print {asset, requested: {id, idempotency_key, ranges, ranges_total} | null},
                      with cut_at when the window was cut at now
${DAEMON_OPTIONS}
${TARGET_TYPES_HELP}
Exit codes: 0 done (also when the window is covered or already requested), 2 usage or runtime error.
`,
  demo: `Usage: coverage-rollup demo [--serve] [--chain] [--database NAME] [--config FILE]

A one-minute tour on its own database and queue prefix, reset on each run, with the rollups of
config/demo.yaml: one Berlin day (2025-06-01) of micro-batches, 24 hourly triggers, a late fill
and a rerun. From --config, DATABASE_URL or REDIS_URL it takes only where PostgreSQL and Redis are.

Options:
  --serve             keep the daemon and its status page up afterwards (Ctrl-C stops); prints
                      the link to the page on the demo day
  --database NAME     the demo's database, dropped and recreated (default coverage_rollup_demo_<user>,
                      so two users on one server keep their own); must start with coverage_rollup_demo
  --chain             config/chain.yaml instead: a month of raw slices through hourly -> daily ->
                      monthly, then one raw hour reprocessed, rerunning each level once, in order
${CONFIG_OPTION}`,
};
