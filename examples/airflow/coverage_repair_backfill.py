"""A backfill DAG that answers coverage-rollup's repair requests (docs/repairs.md).

Either repair target starts it:
- `airflow_asset`: one asset event per attempt on `coverage_rollup.orders_repairs`, with the request
  in `extra`; this DAG is scheduled on that asset, so Airflow runs it on each new event;
- `airflow`: a DAG run `coverage_rollup__repair-<id>~a<attempt>` with the request in `conf`.

For every range of each request it rebuilds the slice (a stand-in here: replace `rebuild` with the
real job, e.g. a Spark batch over that event-time range) and announces it to coverage-rollup's
`POST /v1/events`, at the range's `required_version` for a `replay_required` range. The event's `id`
is the request's key and the range's index, so a task retried by Airflow announces nothing twice.
coverage-rollup then sees the ranges covered: the request becomes `repaired` and the periods that
waited on it trigger. Tested with Airflow 3.3.2 by `npm run test:real`
(test/real/airflow-repair.real.test.ts).

Settings (the environment of Airflow's workers): COVERAGE_ROLLUP_URL (default
http://coverage-rollup:8080), COVERAGE_ROLLUP_WRITE_TOKEN (one of the daemon's `api_tokens`),
BACKFILL_VERSION (the version announced for a `missing` range, default `backfill`).
"""

import os
from datetime import timedelta

import requests
from airflow.sdk import Asset, dag, get_current_context, task

COVERAGE_URL = os.environ.get("COVERAGE_ROLLUP_URL", "http://coverage-rollup:8080")
TOKEN = os.environ.get("COVERAGE_ROLLUP_WRITE_TOKEN")
VERSION = os.environ.get("BACKFILL_VERSION", "backfill")

orders_repairs = Asset("coverage_rollup.orders_repairs")


def rebuild(asset: str, start, end) -> None:
    """The real backfill goes here: rebuild `asset` over [start, end)."""
    print(f"rebuilding {asset} over [{start}, {end})")


@dag(
    schedule=[orders_repairs],
    catchup=False,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=10)},
    tags=["coverage-rollup"],
)
def coverage_repair_backfill():
    @task
    def backfill() -> list:
        context = get_current_context()
        conf = context["dag_run"].conf or {}
        if conf.get("type") == "repair":
            asked = [conf]  # the airflow target: the request is the run's conf
        else:  # the airflow_asset target: one request per triggering asset event
            events = [e for evs in context["triggering_asset_events"].values() for e in evs]
            asked = [e.extra for e in events if (e.extra or {}).get("type") == "repair"]
        announced = []
        for request in asked:
            slices = []
            for i, r in enumerate(request["ranges"]):
                rebuild(request["asset"], r["start"], r["end"])
                slices.append(
                    {
                        "asset": request["asset"],
                        "start": r["start"],
                        "end": r["end"],
                        "version": r["required_version"] or VERSION,
                        "id": f"{request['idempotency_key']}/{i}",
                    }
                )
            if slices:
                answer = requests.post(
                    f"{COVERAGE_URL}/v1/events",
                    json=slices,
                    headers={"Authorization": f"Bearer {TOKEN}"} if TOKEN else {},
                    timeout=30,
                )
                answer.raise_for_status()
            announced.append({"idempotency_key": request["idempotency_key"], "ranges": request["ranges"]})
        return announced

    backfill()


coverage_repair_backfill()
