"""The deferred CoverageSensor with end_from_trigger=False, for test/real/airflow-sensor.real.test.ts:
the task resumes on a worker when its trigger fires, and returns its XCom."""

import pendulum
from airflow.sdk import Param, dag, task
from coverage_rollup_airflow.sensors import CoverageSensor


@dag(
    schedule=None,
    start_date=pendulum.datetime(2025, 6, 1, tz="UTC"),
    catchup=False,
    params={"asset": Param("warehouse.orders", type="string")},
)
def coverage_sensor_resume():
    covered = CoverageSensor(
        task_id="covered",
        asset="{{ params.asset }}",
        start="{{ data_interval_start }}",
        end="{{ data_interval_end }}",
        end_from_trigger=False,
    )

    @task
    def read(coverage: dict) -> None:
        print(f"the sensor returned ratio {coverage['ratio']} for {coverage['asset']}")

    read(covered.output)


coverage_sensor_resume()
