"""A daily DAG that rolls the covered hours of `coverage_rollup.orders_hourly` up (docs/targets/airflow.md).

`RollupMapper(StartOfDayMapper(), DayWindow())` holds the day's run until all 24 hourly partitions
have an asset event (`WaitForAll`, the default; `MinimumCount(-2)` would tolerate two missing).
Tested with Airflow 3.3.2 by `npm run test:real` (test/real/airflow-asset.real.test.ts).
"""

from datetime import timedelta

from airflow.sdk import (
    Asset,
    DayWindow,
    PartitionedAssetTimetable,
    RollupMapper,
    StartOfDayMapper,
    dag,
    get_current_context,
    task,
)

orders_hourly = Asset("coverage_rollup.orders_hourly")
# An asset coverage-rollup may also post to without any DAG scheduled on it (the suite does).
orders_daily_report = Asset("coverage_rollup.orders_daily_report")


@dag(
    schedule=PartitionedAssetTimetable(
        assets=orders_hourly,
        default_partition_mapper=RollupMapper(upstream_mapper=StartOfDayMapper(), window=DayWindow()),
    ),
    catchup=False,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=10)},
    tags=["coverage-rollup"],
)
def coverage_asset_daily():
    @task(outlets=[orders_daily_report])
    def build_day() -> dict:
        context = get_current_context()
        events = [e for evs in context["triggering_asset_events"].values() for e in evs]
        day = context["dag_run"].partition_key
        print(f"building day {day} from {len(events)} hourly asset events")
        return {"partition_key": day, "hours": sorted({e.partition_key for e in events})}

    build_day()


coverage_asset_daily()
