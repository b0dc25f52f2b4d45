"""A period is the partition with the same time window, or the calendars disagree."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo

import dagster as dg
import pytest

from dagster_coverage_rollup import CalendarMismatchError, RollupCalendar, partition_for_period
from dagster_coverage_rollup.calendar import require_time_windows

UTC = timezone.utc
PARIS = ZoneInfo("Europe/Paris")


def at(year: int, month: int, day: int, hour: int = 0, minute: int = 0, tz: tzinfo = UTC) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=tz)


HOURLY = dg.HourlyPartitionsDefinition(start_date="2026-01-01-00:00", timezone="UTC")


def test_an_hour_is_the_hourly_partition_of_that_hour() -> None:
    start = at(2026, 3, 1, 10)
    match = partition_for_period(HOURLY, start, start + timedelta(hours=1))
    assert (match.key, match.exists) == ("2026-03-01-10:00", True)


def test_the_same_hours_in_another_zone_agree_under_their_own_keys() -> None:
    paris = dg.HourlyPartitionsDefinition(start_date="2026-01-01-00:00", timezone="Europe/Paris")
    start = at(2026, 3, 1, 10)
    assert partition_for_period(paris, start, start + timedelta(hours=1)).key == "2026-03-01-11:00"


def test_local_days_across_daylight_saving_are_the_daily_partitions_of_that_zone() -> None:
    daily = dg.DailyPartitionsDefinition(start_date="2026-01-01", timezone="Europe/Paris")
    # 29 March 2026 has 23 hours in Paris, 25 October 26.
    for day, hours in ((29, 23), (30, 24)):
        start = at(2026, 3, day, tz=PARIS)
        end = start.astimezone(UTC) + timedelta(hours=hours)
        assert partition_for_period(daily, start, end).key == f"2026-03-{day}"
    start = at(2026, 10, 25, tz=PARIS)
    assert partition_for_period(daily, start, start.astimezone(UTC) + timedelta(hours=25)).exists


def test_iso_weeks_are_weekly_partitions_starting_on_monday_only() -> None:
    monday = at(2026, 3, 2)
    assert monday.weekday() == 0
    on_monday = dg.WeeklyPartitionsDefinition(start_date="2026-01-05", day_offset=1)
    assert partition_for_period(on_monday, monday, monday + timedelta(days=7)).key == "2026-03-02"
    on_sunday = dg.WeeklyPartitionsDefinition(start_date="2026-01-04")  # Dagster's default
    with pytest.raises(CalendarMismatchError, match="disagree"):
        partition_for_period(on_sunday, monday, monday + timedelta(days=7))


def test_months_and_15_minute_slices() -> None:
    monthly = dg.MonthlyPartitionsDefinition(start_date="2026-01-01")
    assert partition_for_period(monthly, at(2026, 2, 1), at(2026, 3, 1)).key == "2026-02-01"
    quarter_hours = dg.TimeWindowPartitionsDefinition(
        cron_schedule="*/15 * * * *", start="2026-01-01-00:00", fmt="%Y-%m-%d-%H:%M"
    )
    start = at(2026, 3, 1, 10, 45)
    assert partition_for_period(quarter_hours, start, start + timedelta(minutes=15)).key == (
        "2026-03-01-10:45"
    )


def test_an_hourly_rollup_against_daily_partitions_is_refused_naming_both_calendars() -> None:
    daily = dg.DailyPartitionsDefinition(start_date="2026-01-01")
    start = at(2026, 3, 1, 10)
    rollup = RollupCalendar(
        id="orders_hourly", every="hour", timezone="UTC", begin="2026-01-01", upstream=("o",)
    )
    with pytest.raises(CalendarMismatchError) as raised:
        partition_for_period(
            daily, start, start + timedelta(hours=1), rollup=rollup, period_key="2026-03-01T10"
        )
    message = str(raised.value)
    assert "rollup 'orders_hourly' period 2026-03-01T10" in message
    assert "every hour, timezone UTC" in message
    assert "cron '0 0 * * *' in UTC" in message
    assert "'2026-03-01'" in message


def test_days_in_utc_against_days_in_london_disagree_in_summer_only() -> None:
    london = dg.DailyPartitionsDefinition(start_date="2026-01-01", timezone="Europe/London")
    assert partition_for_period(london, at(2026, 2, 1), at(2026, 2, 2)).key == "2026-02-01"
    with pytest.raises(CalendarMismatchError):
        partition_for_period(london, at(2026, 7, 1), at(2026, 7, 2))


def test_a_period_outside_the_partitions_is_matched_but_does_not_exist() -> None:
    before = at(2025, 12, 31, 23)
    assert not partition_for_period(HOURLY, before, before + timedelta(hours=1)).exists
    future = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(hours=2)
    match = partition_for_period(HOURLY, future, future + timedelta(hours=1))
    assert not match.exists
    offset = dg.HourlyPartitionsDefinition(start_date="2026-01-01-00:00", end_offset=3)
    assert partition_for_period(offset, future, future + timedelta(hours=1)).exists


def test_only_time_window_partitions_are_accepted() -> None:
    with pytest.raises(dg.DagsterInvalidDefinitionError, match="needs partitions_def"):
        require_time_windows(None, "the sensor")
    static = dg.StaticPartitionsDefinition(["a", "b"])
    with pytest.raises(dg.DagsterInvalidDefinitionError, match="not StaticPartitionsDefinition"):
        require_time_windows(static, "the sensor")
    assert require_time_windows(HOURLY, "the sensor") is HOURLY
