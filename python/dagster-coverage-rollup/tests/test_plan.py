"""What a tick requests: each triggered period generation once, newest first, reruns again."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from dagster_coverage_rollup import PartitionMatch, Period, SensorCursor, plan_requests, run_key

UTC = timezone.utc
DAY = datetime(2026, 3, 1, tzinfo=UTC)


def hour(h: int, state: str = "triggered", generation: int = 1, reason: str = "covered") -> Period:
    start = DAY + timedelta(hours=h)
    return Period(
        start=start,
        end=start + timedelta(hours=1),
        key=start.strftime("%Y-%m-%dT%H"),
        state=state,
        ratio=1.0 if state == "triggered" else 0.75,
        generation=generation,
        reason=reason if generation else None,
        triggered_at=start + timedelta(hours=1) if generation else None,
    )


def partition(period: Period) -> PartitionMatch:
    return PartitionMatch(key=period.start.strftime("%Y-%m-%d-%H:%M"), exists=True)


def keys(cursor: SensorCursor, periods: list[Period], most: int = 100) -> list[str]:
    return [r.run_key for r in plan_requests(cursor, periods, partition, most).requests]


def test_the_run_key_is_the_daemons_idempotency_key_of_the_trigger() -> None:
    assert run_key("orders_daily", datetime(2025, 6, 1, tzinfo=UTC), 1) == ("orders_daily@20250601T000000Z#1")
    start = datetime(2025, 6, 1, 10, 0, 0, 250_000, tzinfo=UTC)
    assert run_key("r", start, 3) == "r@20250601T100000.250000Z#3"


def test_covered_hours_are_requested_once_and_a_hole_waits_until_filled() -> None:
    cursor = SensorCursor("orders_hourly")
    first = [hour(10), hour(11, state="waiting", generation=0), hour(12)]
    plan = plan_requests(cursor, first, partition, 100)
    assert [(r.partition_key, r.run_key) for r in plan.requests] == [
        ("2026-03-01-12:00", "orders_hourly@20260301T120000Z#1"),
        ("2026-03-01-10:00", "orders_hourly@20260301T100000Z#1"),
    ]
    assert plan.requests[0].tags == {
        "coverage_rollup/rollup": "orders_hourly",
        "coverage_rollup/period": "2026-03-01T12",
        "coverage_rollup/generation": "1",
        "coverage_rollup/reason": "covered",
    }
    # The next tick: nothing new.
    again = plan_requests(cursor, first, partition, 100)
    assert (again.requests, again.already) == ([], 2)
    # The hole is filled (a repair answered): only that hour.
    filled = [hour(10), hour(11), hour(12)]
    assert keys(cursor, filled) == ["orders_hourly@20260301T110000Z#1"]
    assert keys(cursor, filled) == []


def test_a_rerun_is_requested_again_under_its_own_run_key_and_only_once() -> None:
    cursor = SensorCursor("r")
    assert keys(cursor, [hour(10), hour(11)]) == ["r@20260301T110000Z#1", "r@20260301T100000Z#1"]
    # Reprocessing: rerun_pending (generation 1 still), then triggered at generation 2.
    assert keys(cursor, [hour(10, state="rerun_pending"), hour(11)]) == []
    rerun = [hour(10, generation=2, reason="replay"), hour(11)]
    assert keys(cursor, rerun) == ["r@20260301T100000Z#2"]
    assert keys(cursor, rerun) == []


def test_a_sensor_started_after_a_rerun_requests_the_current_generation_only() -> None:
    assert keys(SensorCursor("r"), [hour(10, generation=3)]) == ["r@20260301T100000Z#3"]


def test_at_most_max_requests_per_tick_newest_first_and_the_rest_on_the_next_ticks() -> None:
    cursor = SensorCursor("r")
    periods = [hour(h) for h in range(10)]
    plan = plan_requests(cursor, periods, partition, 4)
    assert [r.period.key[-2:] for r in plan.requests] == ["09", "08", "07", "06"]
    assert plan.later == 6
    assert keys(cursor, periods, 4) == [f"r@20260301T{h:02d}0000Z#1" for h in (5, 4, 3, 2)]
    assert keys(cursor, periods, 4) == ["r@20260301T010000Z#1", "r@20260301T000000Z#1"]
    assert keys(cursor, periods, 4) == []


def test_a_period_whose_partition_does_not_exist_yet_is_requested_once_it_does() -> None:
    cursor = SensorCursor("r")
    exists = False

    def maybe(period: Period) -> PartitionMatch:
        return PartitionMatch(key=partition(period).key, exists=exists)

    plan = plan_requests(cursor, [hour(10)], maybe, 100)
    assert (plan.requests, plan.not_yet) == ([], 1)
    exists = True
    assert [r.partition_key for r in plan_requests(cursor, [hour(10)], maybe, 100).requests] == [
        "2026-03-01-10:00"
    ]


def test_periods_not_triggered_are_never_requested() -> None:
    states = ["waiting", "settling", "missed"]
    periods = [hour(h, state=s, generation=0) for h, s in enumerate(states)]
    plan = plan_requests(SensorCursor("r"), periods, partition, 100)
    assert (plan.requests, plan.already, plan.not_yet) == ([], 0, 0)
