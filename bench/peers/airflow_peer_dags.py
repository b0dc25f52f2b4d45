"""DAGs for bench:peers (bench/peers.ts) on Airflow 3.3.

- `peer_minutes_rollup`: Airflow's own partitioned scheduling over minute keys. Producers post
  an asset event on `peer.minutes` per minute with the minute as `partition_key`
  (`2025-06-01T10:05:00`); `RollupMapper(StartOfHourMapper(), HourWindow())` holds the hour's run
  until all 60 minutes have one (`WaitForAll`, the default).
- `peer_hourly_consumer`: the same consumer, fed by coverage-rollup's `airflow_asset` target
  instead: one event on `peer.hourly` per covered hour, its period start as `partition_key`,
  `StartOfHourMapper` making it the run's partition.
- `peer_assets`: never runs; declares the assets the benchmark loads (`peer.slices`, rows written
  into Airflow's database) and posts to (`peer.ingest`).
"""

from airflow.sdk import (
    Asset,
    HourWindow,
    PartitionedAssetTimetable,
    RollupMapper,
    StartOfHourMapper,
    dag,
    get_current_context,
    task,
)

minutes = Asset("peer.minutes")
hourly = Asset("peer.hourly")


def build_hour() -> dict:
    context = get_current_context()
    return {"partition_key": context["dag_run"].partition_key}


@dag(
    schedule=PartitionedAssetTimetable(
        assets=minutes,
        default_partition_mapper=RollupMapper(upstream_mapper=StartOfHourMapper(), window=HourWindow()),
    ),
    catchup=False,
    tags=["bench-peers"],
)
def peer_minutes_rollup():
    task(build_hour)()


@dag(
    schedule=PartitionedAssetTimetable(assets=hourly, default_partition_mapper=StartOfHourMapper()),
    catchup=False,
    tags=["bench-peers"],
)
def peer_hourly_consumer():
    task(build_hour)()


@dag(schedule=None, catchup=False, tags=["bench-peers"])
def peer_assets():
    @task(outlets=[Asset("peer.slices"), Asset("peer.ingest")])
    def never() -> None:
        pass

    never()


peer_minutes_rollup()
peer_hourly_consumer()
peer_assets()
