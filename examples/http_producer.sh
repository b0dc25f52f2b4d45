#!/bin/sh
# Publish asset events to coverage-rollup over HTTP: POST /v1/events (docs/events.md "HTTP").
#
#   sh examples/http_producer.sh warehouse.orders 2025-06-01T10:00:00Z 2025-06-01T11:00:00Z v1
#
# Run beside a daemon (in the directory it was started in, or with COVERAGE_ROLLUP_DATA_DIR set to
# its data directory) it finds the daemon's address and this machine's token in the record the
# daemon keeps there, daemon.json (docs/operations.md, "The daemon's record"). Anywhere else, give
# COVERAGE_ROLLUP_URL=http://host:8080 and COVERAGE_ROLLUP_TOKEN (one of the daemon's api_tokens).
#
# For producers that reach neither Redis nor PostgreSQL. The daemon validates the events as its
# worker does (400 with every error, nothing taken, if any is invalid); on Redis it routes each to
# its queue group and answers 202 {"accepted", "ids"}; where the queue is in its PostgreSQL
# (queue.backend: postgres, the embedded default) it commits them into the index and answers 200
# {"accepted", "ids", "results"} after the commit. A stable `id` makes a re-send harmless.
set -eu
asset=$1 start=$2 end=$3 version=${4:-v1}
if [ -z "${COVERAGE_ROLLUP_URL:-}" ]; then
  record=${COVERAGE_ROLLUP_DATA_DIR:-.coverage-rollup}/daemon.json
  if [ ! -r "$record" ]; then
    echo "http_producer.sh: no daemon is recorded in $record: run it where the daemon was started, or set COVERAGE_ROLLUP_URL and COVERAGE_ROLLUP_TOKEN" >&2
    exit 2
  fi
  field() { node -p "JSON.parse(require('fs').readFileSync(process.argv[1], 'utf8'))[process.argv[2]]" "$record" "$1"; }
  if ! kill -0 "$(field pid)" 2>/dev/null; then
    echo "http_producer.sh: the daemon recorded in $record (pid $(field pid)) is not running" >&2
    exit 2
  fi
  COVERAGE_ROLLUP_URL=$(field url)
  COVERAGE_ROLLUP_TOKEN=${COVERAGE_ROLLUP_TOKEN:-$(field token)}
fi
curl --fail-with-body --silent --show-error -X POST "$COVERAGE_ROLLUP_URL/v1/events" \
  -H "authorization: Bearer ${COVERAGE_ROLLUP_TOKEN:?set COVERAGE_ROLLUP_TOKEN, one of the api_tokens of the daemon}" \
  -H 'content-type: application/json' \
  --data "[{\"asset\": \"$asset\", \"start\": \"$start\", \"end\": \"$end\", \"version\": \"$version\", \"id\": \"$asset@$start#$version\"}]"
echo
