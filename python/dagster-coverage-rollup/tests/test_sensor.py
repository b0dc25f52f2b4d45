"""The sensor as Dagster evaluates it (build_sensor_context), against a stand-in daemon."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import dagster as dg
import pytest
from coverage_rollup import ApiError
from dagster._core.definitions.sensor_definition import SensorExecutionData

from conftest import StandInDaemon
from dagster_coverage_rollup import (
    CalendarMismatchError,
    CoverageRollupResource,
    build_coverage_rollup_sensor,
)

UTC = timezone.utc
BEGIN = datetime(2026, 3, 1, tzinfo=UTC)
HOURLY = dg.HourlyPartitionsDefinition(start_date="2026-03-01-00:00", timezone="UTC")
RESOURCE = CoverageRollupResource(url="http://daemon:8080", token="t0ken")


@dg.asset(partitions_def=HOURLY)
def report() -> None: ...


def tick(
    sensor: dg.SensorDefinition, cursor: str | None, target: dg.AssetsDefinition = report
) -> SensorExecutionData:
    """One evaluation the way the sensor daemon makes it, in the sensor's code location."""
    defs = dg.Definitions(assets=[target], sensors=[sensor], resources={"coverage_rollup": RESOURCE})
    with dg.build_sensor_context(
        cursor=cursor, definitions=defs, resources={"coverage_rollup": RESOURCE}
    ) as context:
        return sensor.evaluate_tick(context)


def test_covered_hours_become_runs_of_their_partitions_once_and_a_hole_once_filled(
    daemon: StandInDaemon,
) -> None:
    daemon.hours(BEGIN, 48)
    daemon.set("2026-03-01T10", "triggered", 1)
    daemon.set("2026-03-01T12", "triggered", 1)
    sensor = build_coverage_rollup_sensor("orders_hourly", target=report)
    assert sensor.name == "orders_hourly_covered_periods"

    first = tick(sensor, None)
    requests = first.run_requests or []
    assert [(r.partition_key, r.run_key) for r in requests] == [
        ("2026-03-01-12:00", "orders_hourly@20260301T120000Z#1"),
        ("2026-03-01-10:00", "orders_hourly@20260301T100000Z#1"),
    ]
    assert requests[0].tags["coverage_rollup/period"] == "2026-03-01T12"
    assert daemon.requests[0].headers["authorization"] == "Bearer t0ken"

    second = tick(sensor, first.cursor)
    assert not second.run_requests
    assert second.cursor == first.cursor
    assert "2 requested before" in (second.skip_message or "")
    assert "46 waiting" in (second.skip_message or "")

    daemon.set("2026-03-01T11", "triggered", 1)  # the hole filled
    daemon.set("2026-03-01T10", "triggered", 2, reason="replay")  # and a rerun
    third = tick(sensor, first.cursor)
    assert [r.run_key for r in third.run_requests or []] == [
        "orders_hourly@20260301T110000Z#1",
        "orders_hourly@20260301T100000Z#2",
    ]
    assert not tick(sensor, third.cursor).run_requests


def test_called_directly_as_in_a_users_test_it_answers_the_same(daemon: StandInDaemon) -> None:
    daemon.hours(BEGIN, 2)
    daemon.set("2026-03-01T01", "triggered", 1)
    sensor = build_coverage_rollup_sensor("orders_hourly", target=report)
    with dg.build_sensor_context(resources={"coverage_rollup": RESOURCE}) as context:
        result = sensor(context)
    assert isinstance(result, dg.SensorResult)
    assert [r.partition_key for r in result.run_requests or []] == ["2026-03-01-01:00"]


def test_every_page_of_the_listing_is_read(daemon: StandInDaemon) -> None:
    daemon.hours(BEGIN, 30)
    for h in range(30):
        daemon.set(f"2026-03-{1 + h // 24:02d}T{h % 24:02d}", "triggered", 1)
    daemon.page_size = 7
    sensor = build_coverage_rollup_sensor("orders_hourly", target=report, max_runs_per_tick=1000)
    assert len(tick(sensor, None).run_requests or []) == 30


def test_lookback_reads_only_the_latest_periods(daemon: StandInDaemon) -> None:
    sensor = build_coverage_rollup_sensor("orders_hourly", target=report, lookback=timedelta(hours=6))
    daemon.hours(BEGIN, 10)
    tick(sensor, None)
    asked = next(r for r in daemon.requests if r.url.params.get("state") == "triggered")
    start = datetime.fromisoformat(asked.url.params["start"].replace("Z", "+00:00"))
    end = datetime.fromisoformat(asked.url.params["end"].replace("Z", "+00:00"))
    assert end - start == timedelta(hours=6)


def test_an_hourly_rollup_under_daily_partitions_fails_the_tick_naming_both(
    daemon: StandInDaemon,
) -> None:
    daily = dg.DailyPartitionsDefinition(start_date="2026-03-01")

    @dg.asset(partitions_def=daily)
    def daily_report() -> None: ...

    daemon.hours(BEGIN, 3)
    sensor = build_coverage_rollup_sensor("orders_hourly", target=daily_report)
    with pytest.raises(CalendarMismatchError, match=r"every hour, timezone UTC.*cron '0 0 \* \* \*'"):
        tick(sensor, None, daily_report)


def test_an_unknown_rollup_fails_the_tick_with_the_daemons_code(daemon: StandInDaemon) -> None:
    sensor = build_coverage_rollup_sensor("no_such_rollup", target=report)
    with pytest.raises(ApiError) as raised:
        tick(sensor, None)
    assert raised.value.code == "unknown_rollup"


def test_definition_errors_are_raised_when_the_code_location_loads() -> None:
    @dg.asset
    def unpartitioned() -> None: ...

    with pytest.raises(dg.DagsterInvalidDefinitionError, match="needs partitions_def"):
        build_coverage_rollup_sensor("r", target=unpartitioned)
    with pytest.raises(dg.DagsterInvalidDefinitionError, match="max_runs_per_tick"):
        build_coverage_rollup_sensor("r", target=report, max_runs_per_tick=0)
    with pytest.raises(dg.DagsterInvalidDefinitionError, match="rollup must be"):
        build_coverage_rollup_sensor("", target=report)
    assert build_coverage_rollup_sensor("a.b-c", target=report).name == "a_b_c_covered_periods"


def test_the_sensor_loads_in_definitions_with_the_resource() -> None:
    sensor = build_coverage_rollup_sensor("orders_hourly", target=report)
    defs = dg.Definitions(assets=[report], sensors=[sensor], resources={"coverage_rollup": RESOURCE})
    assert defs.resolve_sensor_def("orders_hourly_covered_periods") is not None
