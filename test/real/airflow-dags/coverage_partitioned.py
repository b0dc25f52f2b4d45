"""A test DAG for test/real/airflow-dagruns.real.test.ts: a partitioned DAG (Airflow 3.2+), so the
`airflow` target finds `timetable_partitioned` and sends the period's partition key. Its own
schedule (once a year, no catch-up) never collides with the suite's runs."""

from airflow.sdk import CronPartitionTimetable, dag, get_current_context, task


@dag(schedule=CronPartitionTimetable("0 0 1 1 *", timezone="UTC"), catchup=False, tags=["coverage-rollup-test"])
def coverage_partitioned():
    @task
    def build() -> dict:
        context = get_current_context()
        return {"partition_key": context["dag_run"].partition_key, "ds": context["ds"]}

    build()


coverage_partitioned()
