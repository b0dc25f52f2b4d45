"""Dagster definitions for bench:peers (bench/peers.ts) on Dagster 1.13.

- `peers/slices`: an external asset of 5-minute partitions that producers report
  (`report_asset_materialization`, one per slice).
- `peers/hourly_rollup`: Dagster's declarative automation over hourly partitions: `eager()`
  requests an hour's run once its 12 slices are materialized and one was updated. Without its
  `in_latest_time_window` part, so past hours count too (the benchmark cannot wait for the clock).
  Evaluated by the automation condition sensor at its default interval (30 s).
- `peers/ours_hourly`: the external asset coverage-rollup's `dagster` target materializes, one
  partition per covered hour.
- `peers/ingest`: an unpartitioned external asset, for the reports-per-second round.

Environment: PARTITIONS_START (the first hour, `2026-12-01-00:00`).
"""

import os

import dagster as dg

START = os.environ["PARTITIONS_START"]
HOURLY = dg.HourlyPartitionsDefinition(start_date=START, timezone="UTC")
FIVE_MINUTES = dg.TimeWindowPartitionsDefinition(
    cron_schedule="*/5 * * * *", start=START, fmt="%Y-%m-%d-%H:%M", timezone="UTC"
)

slices = dg.AssetSpec(key=["peers", "slices"], partitions_def=FIVE_MINUTES)
ours_hourly = dg.AssetSpec(key=["peers", "ours_hourly"], partitions_def=HOURLY)
ingest = dg.AssetSpec(key=["peers", "ingest"])


@dg.asset(
    key=["peers", "hourly_rollup"],
    deps=[slices],
    partitions_def=HOURLY,
    automation_condition=dg.AutomationCondition.eager().without(
        dg.AutomationCondition.in_latest_time_window()
    ),
)
def hourly_rollup(context: dg.AssetExecutionContext) -> None:
    context.log.info(f"building hour {context.partition_key}")


defs = dg.Definitions(
    assets=[slices, ours_hourly, ingest, hourly_rollup],
    sensors=[
        dg.AutomationConditionSensorDefinition(
            "peers_automation",
            target=dg.AssetSelection.all(),
            default_status=dg.DefaultSensorStatus.RUNNING,
        )
    ],
)
