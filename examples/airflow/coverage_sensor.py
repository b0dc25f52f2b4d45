"""A DAG that waits until [data_interval_start, data_interval_end) of an asset is covered, then builds.

The sensor asks coverage-rollup's `GET /v1/assets/{asset}/coverage` (docs/http-api.md) in
reschedule mode: between pokes it holds no worker slot. While it waits, each poke logs the ranges
still missing; it succeeds once the range is covered. `coverage-rollup check` works the same way
from a BashSensor (exit 0 when covered, 1 when not). Tested with Airflow 3.3.2 by
`npm run test:real` (test/real/airflow-sensor.real.test.ts).

Settings (the environment of Airflow's workers): COVERAGE_ROLLUP_URL (default
http://coverage-rollup:8080), COVERAGE_ROLLUP_TOKEN (a read token, when `read_tokens` is set),
COVERAGE_POKE_SECONDS (default 60). The asset is the `asset` param (a run's conf may override it).
"""

import os

import pendulum
import requests
from airflow.sdk import Param, PokeReturnValue, dag, get_current_context, task

COVERAGE_URL = os.environ.get("COVERAGE_ROLLUP_URL", "http://coverage-rollup:8080")
TOKEN = os.environ.get("COVERAGE_ROLLUP_TOKEN")
POKE_SECONDS = int(os.environ.get("COVERAGE_POKE_SECONDS", "60"))


@dag(
    schedule="@hourly",
    start_date=pendulum.datetime(2025, 6, 1, tz="UTC"),
    catchup=False,
    params={"asset": Param("warehouse.orders", type="string")},
    tags=["coverage-rollup"],
)
def coverage_sensor():
    @task.sensor(poke_interval=POKE_SECONDS, timeout=6 * 3600, mode="reschedule")
    def covered() -> PokeReturnValue:
        context = get_current_context()
        asset = context["params"]["asset"]
        start, end = context["data_interval_start"], context["data_interval_end"]
        try:
            response = requests.get(
                f"{COVERAGE_URL}/v1/assets/{requests.utils.quote(asset, safe='')}/coverage",
                params={"start": start.isoformat(), "end": end.isoformat(), "limit": 20},
                headers={"Authorization": f"Bearer {TOKEN}"} if TOKEN else {},
                timeout=10,
            )
        except requests.RequestException as error:  # coverage-rollup unreachable: ask again next poke
            print(f"coverage-rollup did not answer ({error}); asking again in {POKE_SECONDS} s")
            return PokeReturnValue(is_done=False)
        if response.status_code == 404:  # no event for the asset yet: all of it is missing
            print(f"{asset} [{start.isoformat()}, {end.isoformat()}) not covered: nothing seen yet")
            return PokeReturnValue(is_done=False)
        response.raise_for_status()
        answer = response.json()
        if not answer["covered"]:
            missing = ", ".join(f"[{m['start']}, {m['end']})" for m in answer["missing"])
            more = " ..." if answer["missing_count"] > len(answer["missing"]) else ""
            print(
                f"{asset} [{answer['start']}, {answer['end']}) not covered: ratio {answer['ratio']},"
                f" missing {answer['missing_count']} range(s): {missing}{more}"
            )
        return PokeReturnValue(is_done=answer["covered"], xcom_value=answer["ratio"])

    @task
    def build_report(ratio: float) -> None:
        print(f"building the hourly report over fully covered data (ratio {ratio})")

    build_report(covered())


coverage_sensor()
