#!/bin/sh
# Publish asset events to coverage-rollup over HTTP: POST /v1/events (docs/events.md "HTTP").
#
#   COVERAGE_ROLLUP_URL=http://127.0.0.1:8080 COVERAGE_ROLLUP_TOKEN=... sh examples/http_producer.sh \
#     warehouse.orders 2025-06-01T10:00:00Z 2025-06-01T11:00:00Z v1
#
# For producers that reach neither Redis nor PostgreSQL. The daemon validates the events as its
# worker does (400 with every error, nothing taken, if any is invalid); on Redis it routes each to
# its queue group and answers 202 {"accepted", "ids"}; where the queue is in its PostgreSQL
# (queue.backend: postgres, the embedded default) it commits them into the index and answers 200
# {"accepted", "ids", "results"} after the commit. The token is one of the daemon's `api_tokens`.
# A stable `id` makes a re-send harmless.
set -eu
asset=$1 start=$2 end=$3 version=${4:-v1}
curl --fail-with-body --silent --show-error -X POST "${COVERAGE_ROLLUP_URL:-http://127.0.0.1:8080}/v1/events" \
  -H "authorization: Bearer ${COVERAGE_ROLLUP_TOKEN:?set COVERAGE_ROLLUP_TOKEN}" \
  -H 'content-type: application/json' \
  --data "[{\"asset\": \"$asset\", \"start\": \"$start\", \"end\": \"$end\", \"version\": \"$version\", \"id\": \"$asset@$start#$version\"}]"
echo
