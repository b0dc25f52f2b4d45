"""A Dagster code location for test/real/dagster-integration.real.test.ts, made of the built
dagster-coverage-rollup wheel: an hourly partitioned asset run by the coverage sensor of the
suite's rollup (ticking every 5 s from the start), its coverage check, and a second sensor of the
same hourly rollup over daily partitions, whose ticks must fail naming both calendars.

Environment: COVERAGE_ROLLUP_URL, COVERAGE_ROLLUP_TOKEN, COVERAGE_ROLLUP_ROLLUP (the rollup id),
COVERAGE_ROLLUP_ASSET (its upstream), PARTITIONS_START (the first day, 2026-12-06).
"""

import os

import dagster as dg
from dagster_coverage_rollup import (
    CoverageRollupResource,
    build_coverage_check,
    build_coverage_rollup_sensor,
)

ROLLUP = os.environ["COVERAGE_ROLLUP_ROLLUP"]
START = os.environ["PARTITIONS_START"]
HOURLY = dg.HourlyPartitionsDefinition(start_date=f"{START}-00:00", timezone="UTC")
DAILY = dg.DailyPartitionsDefinition(start_date=START, timezone="UTC")

# What the rollup's `dagster` target materializes, one partition per covered hour.
orders_hourly = dg.AssetSpec(key=["warehouse", "orders_hourly"], partitions_def=HOURLY)


@dg.asset(deps=[orders_hourly], partitions_def=HOURLY)
def orders_hourly_report(context: dg.AssetExecutionContext) -> None:
    context.log.info(f"building the report of hour {context.partition_key}")


@dg.asset(partitions_def=DAILY)
def orders_daily_report(context: dg.AssetExecutionContext) -> None:
    context.log.info(f"building the report of day {context.partition_key}")


defs = dg.Definitions(
    assets=[orders_hourly, orders_hourly_report, orders_daily_report],
    asset_checks=[build_coverage_check(orders_hourly_report, os.environ["COVERAGE_ROLLUP_ASSET"])],
    sensors=[
        build_coverage_rollup_sensor(
            ROLLUP,
            target=orders_hourly_report,
            name="hourly_reports",
            minimum_interval_seconds=5,
            default_status=dg.DefaultSensorStatus.RUNNING,
        ),
        build_coverage_rollup_sensor(
            ROLLUP,
            target=orders_daily_report,
            name="daily_reports_of_an_hourly_rollup",
            minimum_interval_seconds=5,
            default_status=dg.DefaultSensorStatus.RUNNING,
        ),
    ],
    resources={
        "coverage_rollup": CoverageRollupResource(
            url=dg.EnvVar("COVERAGE_ROLLUP_URL"), token=dg.EnvVar("COVERAGE_ROLLUP_TOKEN")
        )
    },
)
