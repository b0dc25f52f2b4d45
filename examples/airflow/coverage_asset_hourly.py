"""A DAG Airflow itself runs once per covered hour, fed by the `airflow_asset` target (docs/targets/airflow.md).

coverage-rollup posts one asset event per decision on `coverage_rollup.orders_hourly`, with the
period start as `partition_key` (`2026-06-01T10:00:00`) and the trigger payload in `extra`.
`StartOfHourMapper` turns that key into this DAG's partition (`2026-06-01T10`), so Airflow's
scheduler creates one run per covered hour. Tested with Airflow 3.3.2 by `npm run test:real`
(test/real/airflow-asset.real.test.ts).
"""

from datetime import timedelta

from airflow.sdk import Asset, PartitionedAssetTimetable, StartOfHourMapper, dag, get_current_context, task

orders_hourly = Asset("coverage_rollup.orders_hourly")


@dag(
    schedule=PartitionedAssetTimetable(assets=orders_hourly, default_partition_mapper=StartOfHourMapper()),
    catchup=False,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=10)},
    tags=["coverage-rollup"],
)
def coverage_asset_hourly():
    @task
    def build() -> dict:
        context = get_current_context()
        events = [e for evs in context["triggering_asset_events"].values() for e in evs]
        payloads = [e.extra for e in events]  # the trigger payloads (docs/rollups.md "Triggers")
        partition = context["dag_run"].partition_key
        print(f"building hour {partition} from {[p['idempotency_key'] for p in payloads]}")
        # ... build the hour from payloads[-1]["period"]["start"] .. ["end"] ...
        return {
            "partition_key": partition,
            "upstream_keys": [e.partition_key for e in events],
            "idempotency_keys": [p["idempotency_key"] for p in payloads],
        }

    build()


coverage_asset_hourly()
