"""An Airflow DAG that waits for [data_interval_start, data_interval_end) of an asset to be covered.

The sensor asks the coverage API; `coverage-rollup check` works the same way from a BashSensor
(exit 0 when covered, 1 when not).
"""
import pendulum
import requests
from airflow.sdk import dag, task
from airflow.sensors.base import PokeReturnValue

COVERAGE_URL = "http://coverage-rollup:8080/v1/assets/{asset}/coverage"


@dag(schedule="@hourly", start_date=pendulum.datetime(2025, 6, 1, tz="UTC"), catchup=False)
def orders_hourly_report():
    @task.sensor(poke_interval=60, timeout=6 * 3600, mode="reschedule")
    def orders_covered(data_interval_start=None, data_interval_end=None) -> PokeReturnValue:
        answer = requests.get(
            COVERAGE_URL.format(asset="warehouse.orders"),
            params={"start": data_interval_start.isoformat(), "end": data_interval_end.isoformat(), "limit": 0},
            timeout=10,
        ).json()
        # `missing` lists the ranges no slice covers yet; log them so the wait is explainable.
        print(f"ratio={answer['ratio']} missing={answer['missing']}")
        return PokeReturnValue(is_done=answer["covered"], xcom_value=answer["ratio"])

    @task
    def build_report(ratio: float) -> None:
        print(f"building the hourly report over fully covered data (ratio {ratio})")

    build_report(orders_covered())


orders_hourly_report()
