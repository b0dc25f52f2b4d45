"""The rollup and period listings, read as the daemon answers them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import httpx
import pytest
from coverage_rollup import ApiError, Unreachable

from conftest import StandInDaemon
from dagster_coverage_rollup import Rollups
from dagster_coverage_rollup.rollups import utc_iso

UTC = timezone.utc
BEGIN = datetime(2026, 3, 1, tzinfo=UTC)


def rollups_of(handler: httpx.MockTransport) -> Rollups:
    return Rollups("http://daemon:8080/", "t0ken", transport=handler)


def test_periods_are_read_typed_page_after_page() -> None:
    daemon = StandInDaemon()
    daemon.hours(BEGIN, 5)
    daemon.set("2026-03-01T03", "triggered", 2, reason="replay")
    daemon.page_size = 2
    with rollups_of(httpx.MockTransport(daemon.handle)) as api:
        pages = list(api.periods("orders_hourly", BEGIN, BEGIN + timedelta(hours=5)))
    assert [len(p.periods) for p in pages] == [2, 2, 1]
    period = pages[1].periods[1]
    assert (period.key, period.state, period.generation, period.reason) == (
        "2026-03-01T03",
        "triggered",
        2,
        "replay",
    )
    assert period.start == BEGIN + timedelta(hours=3)
    assert period.triggered_at == BEGIN + timedelta(hours=4)
    assert pages[0].counts == {"waiting": 4, "triggered": 1}
    sent = daemon.requests[0]
    assert sent.url.params["start"] == "2026-03-01T00:00:00Z"
    assert sent.headers["authorization"] == "Bearer t0ken"
    assert sent.headers["user-agent"] == "dagster-coverage-rollup"


def test_an_integer_rollup_is_refused_as_not_mapping_to_time_partitions() -> None:
    def integer(request: httpx.Request) -> httpx.Response:
        period = {"start": 0, "end": 100, "key": "0", "state": "waiting", "ratio": 0}
        period.update(generation=0, reason=None, triggered_at=None)
        return httpx.Response(200, json={"periods": [period], "counts": {}, "next_cursor": None})

    with (
        rollups_of(httpx.MockTransport(integer)) as api,
        pytest.raises(ValueError, match="integer periods"),
    ):
        api.page("offsets", BEGIN, BEGIN + timedelta(hours=1))


def test_the_calendar_of_a_rollup_and_an_unknown_one() -> None:
    daemon = StandInDaemon(every="day")
    with rollups_of(httpx.MockTransport(daemon.handle)) as api:
        calendar = api.calendar("orders_hourly")
        assert (calendar.every, calendar.timezone, calendar.upstream) == (
            "day",
            "UTC",
            ("warehouse.orders",),
        )
        with pytest.raises(ApiError) as raised:
            api.calendar("nope")
    assert raised.value.code == "unknown_rollup"


def test_errors_carry_the_daemons_code_and_no_answer_is_unreachable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"code": "invalid_bound", "message": "start: bad"})

    with rollups_of(httpx.MockTransport(refuse)) as api, pytest.raises(ApiError) as raised:
        api.page("r", BEGIN, BEGIN)
    assert (raised.value.status, raised.value.code) == (400, "invalid_bound")

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with rollups_of(httpx.MockTransport(down)) as api, pytest.raises(Unreachable):
        api.page("r", BEGIN, BEGIN)


def test_instants_go_out_in_utc_and_naive_ones_are_refused() -> None:
    paris = timezone(timedelta(hours=2))
    assert utc_iso(datetime(2026, 6, 1, 12, tzinfo=paris)) == "2026-06-01T10:00:00Z"
    with pytest.raises(ValueError, match="no time zone"):
        utc_iso(datetime(2026, 6, 1))
