"""A DAG that loads an hour of data, then tells coverage-rollup that hour of the asset is complete.

    pip install airflow-provider-coverage-rollup
    # from a clone, until it is published:
    pip install ./python/coverage-rollup ./python/airflow-provider-coverage-rollup

The provider's CoverageAnnounceOperator sends one event over coverage-rollup's `POST /v1/events`
(docs/targets/airflow.md): [data_interval_start, data_interval_end) of the `asset` param at the
`version` param. Rollups waiting on the asset see it like any producer's event. The connection
`coverage_rollup_default` needs a write token (one of the daemon's `api_tokens`):

    AIRFLOW_CONN_COVERAGE_ROLLUP_DEFAULT='{"conn_type": "coverage_rollup",
        "host": "http://coverage-rollup:8080", "password": "<a write token>"}'

Tested with Airflow 3.3.2 by `npm run test:real` (test/real/airflow-sensor.real.test.ts).
"""

import pendulum
from airflow.sdk import Param, dag, task
from coverage_rollup_airflow.operators import CoverageAnnounceOperator


@dag(
    schedule="@hourly",
    start_date=pendulum.datetime(2025, 6, 1, tz="UTC"),
    catchup=False,
    params={
        "asset": Param("warehouse.orders_hourly", type="string"),
        "version": Param("v1", type="string"),
    },
    tags=["coverage-rollup"],
)
def coverage_announce():
    @task
    def load() -> None:
        print("writing the hour's rows")  # the work whose output the next task announces

    announce = CoverageAnnounceOperator(
        task_id="announce",
        asset="{{ params.asset }}",
        start="{{ data_interval_start }}",
        end="{{ data_interval_end }}",
        version="{{ params.version }}",
        coverage_rollup_conn_id="coverage_rollup_default",
    )
    load() >> announce


coverage_announce()
