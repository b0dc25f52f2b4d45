"""DAGs that wait until [data_interval_start, data_interval_end) of an asset is covered, then build.

    pip install airflow-provider-coverage-rollup
    # from a clone, until it is published:
    pip install ./python/coverage-rollup ./python/airflow-provider-coverage-rollup

The provider's CoverageSensor asks coverage-rollup (docs/targets/airflow.md):

- `coverage_sensor`: deferred (the default). The task gives its worker slot back; the trigger waits
  in Airflow's triggerer on the daemon's waiting coverage call and ends the task as soon as the
  commit that covers the window lands. Needs `airflow triggerer` running.
- `coverage_sensor_reschedule`: `deferrable=False`, so it pokes in reschedule mode every
  COVERAGE_POKE_SECONDS (default 60), holding no slot in between.

Both log the ranges still missing while they wait. The daemon is the connection
`coverage_rollup_default`, for example from the environment of every Airflow component:

    AIRFLOW_CONN_COVERAGE_ROLLUP_DEFAULT='{"conn_type": "coverage_rollup",
        "host": "http://coverage-rollup:8080", "password": "<a read token, if read_tokens is set>"}'

The asset is the `asset` param (a run's conf may override it). Tested with Airflow 3.3.2 by
`npm run test:real` (test/real/airflow-sensor.real.test.ts).
"""

import os

import pendulum
from airflow.sdk import Param, dag, task
from coverage_rollup_airflow.sensors import CoverageSensor

POKE_SECONDS = int(os.environ.get("COVERAGE_POKE_SECONDS", "60"))


@task
def build_report(data_interval_start=None, data_interval_end=None) -> None:
    print(f"building the report of [{data_interval_start}, {data_interval_end}) over fully covered data")


def hourly_report(deferrable: bool) -> None:
    covered = CoverageSensor(
        task_id="covered",
        asset="{{ params.asset }}",
        start="{{ data_interval_start }}",
        end="{{ data_interval_end }}",
        coverage_rollup_conn_id="coverage_rollup_default",
        deferrable=deferrable,
        poke_interval=POKE_SECONDS,
        timeout=6 * 3600,
    )
    covered >> build_report()


settings = {
    "schedule": "@hourly",
    "start_date": pendulum.datetime(2025, 6, 1, tz="UTC"),
    "catchup": False,
    "params": {"asset": Param("warehouse.orders", type="string")},
    "tags": ["coverage-rollup"],
}


@dag(**settings)
def coverage_sensor():
    hourly_report(deferrable=True)


@dag(**settings)
def coverage_sensor_reschedule():
    hourly_report(deferrable=False)


coverage_sensor()
coverage_sensor_reschedule()
