"""The clients against a stand-in transport: what they send and how they read the answers."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from conftest import coverage_answer
from coverage_rollup import (
    Announced,
    ApiError,
    AsyncClient,
    Client,
    Coverage,
    Event,
    Unreachable,
    __version__,
)

UTC = timezone.utc


def client_for(handler: httpx.MockTransport | None = None, **kwargs: object) -> Client:
    return Client("http://daemon:8080/", "t0ken", transport=handler, **kwargs)  # type: ignore[arg-type]


def test_coverage_sends_the_window_and_reads_a_typed_answer() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=coverage_answer(False))

    with client_for(httpx.MockTransport(answer)) as client:
        result = client.coverage(
            "warehouse/orders #1",
            datetime(2025, 6, 14, tzinfo=UTC),
            "2025-06-14T04:00:00Z",
            limit=20,
        )
    request = seen[0]
    assert request.url.raw_path == (
        b"/v1/assets/warehouse%2Forders%20%231/coverage"
        b"?start=2025-06-14T00%3A00%3A00%2B00%3A00&end=2025-06-14T04%3A00%3A00Z&limit=20"
    )
    assert request.headers["authorization"] == "Bearer t0ken"
    assert request.headers["user-agent"] == f"coverage-rollup-python/{__version__}"
    assert isinstance(result, Coverage)
    assert result.covered is False
    assert result.ratio == 0.9375
    three_ten = datetime(2025, 6, 14, 3, 10, tzinfo=UTC)
    assert result.missing == [(three_ten, datetime(2025, 6, 14, 3, 25, tzinfo=UTC))]
    assert result.missing_count == 1
    assert result.missing_total == 900
    assert result.last_event_at == datetime(2025, 6, 14, 4, 0, 7, 125000, tzinfo=UTC)
    assert result.batches[0].version == "v3"
    assert result.raw["max_lag"] is None
    assert result.describe_missing() == "[2025-06-14T03:10:00+00:00, 2025-06-14T03:25:00+00:00)"


def test_integer_assets_answer_integers() -> None:
    answer = coverage_answer(
        False,
        domain="integer",
        start=0,
        end=100,
        missing=[{"start": 40, "end": 60}],
        batches=[],
        covered_until=40,
        last_event_at=None,
        replay_required=[{"start": 60, "end": 70, "version": "v1", "required_version": "v2"}],
        replay_required_count=1,
    )
    transport = httpx.MockTransport(lambda _: httpx.Response(200, json=answer))
    with client_for(transport) as client:
        result = client.coverage("offsets", 0, 100)
    assert result.missing == [(40, 60)]
    assert result.replay_required[0].required_version == "v2"
    assert result.covered_until == 40
    assert result.describe_missing() == "[40, 60), [60, 70) replay at v2"


def test_wait_asks_the_daemon_to_hold_the_answer() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=coverage_answer(True))

    with client_for(httpx.MockTransport(answer)) as client:
        client.coverage("a", "2025-06-14T00:00:00Z", "2025-06-14T04:00:00Z", wait=90.5)
        client.coverage("a", "2025-06-14T00:00:00Z", "2025-06-14T04:00:00Z", wait=timedelta(minutes=5))
    assert seen[0].url.params["wait"] == "PT90.500S"
    assert seen[1].url.params["wait"] == "PT300S"
    # The read timeout outlasts the wait.
    assert seen[1].extensions["timeout"]["read"] >= 300


def test_api_errors_carry_their_code() -> None:
    body = {"code": "end_before_start", "message": "end 1 is before start 2"}
    transport = httpx.MockTransport(lambda _: httpx.Response(400, json=body))
    with client_for(transport) as client, pytest.raises(ApiError) as raised:
        client.coverage("a", 2, 1)
    assert raised.value.code == "end_before_start"
    assert raised.value.status == 400
    assert raised.value.message == "end 1 is before start 2"


def test_error_details_and_retry_after() -> None:
    body = {
        "code": "invalid_events",
        "message": "1 of 1 events are invalid; none was committed",
        "errors": [{"index": 0, "reason": "end_before_start", "message": "..."}],
    }
    transport = httpx.MockTransport(lambda _: httpx.Response(400, json=body, headers={"retry-after": "3"}))
    with client_for(transport) as client, pytest.raises(ApiError) as raised:
        client.announce("a", "2025-06-01T11:00:00Z", "2025-06-01T10:00:00Z")
    assert raised.value.details["errors"][0]["reason"] == "end_before_start"
    assert raised.value.retry_after == 3


def test_a_body_that_is_not_the_api_s_gets_an_http_code() -> None:
    transport = httpx.MockTransport(lambda _: httpx.Response(502, text="Bad Gateway"))
    with client_for(transport) as client, pytest.raises(ApiError) as raised:
        client.coverage("a", 1, 2)
    assert raised.value.code == "http_502"
    assert raised.value.message == "Bad Gateway"


def test_no_answer_is_unreachable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with client_for(httpx.MockTransport(refuse)) as client, pytest.raises(Unreachable) as raised:
        client.coverage("a", 1, 2)
    assert isinstance(raised.value.__cause__, httpx.ConnectError)


def test_announce_one_event() -> None:
    bodies: list[object] = []

    def answer(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        assert request.url.path == "/v1/events"
        return httpx.Response(
            200,
            json={
                "accepted": 1,
                "ids": [None],
                "results": [{"status": "committed", "asset": "a", "seq": 7}],
            },
        )

    with client_for(httpx.MockTransport(answer)) as client:
        result = client.announce(
            "a",
            datetime(2025, 6, 1, 10, tzinfo=UTC),
            "2025-06-01T10:05:00Z",
            "v3",
            "batch-1",
            extra={"k": 1},
        )
    assert bodies == [
        [
            {
                "asset": "a",
                "start": "2025-06-01T10:00:00+00:00",
                "end": "2025-06-01T10:05:00Z",
                "version": "v3",
                "id": "batch-1",
                "extra": {"k": 1},
            }
        ]
    ]
    assert result.committed is True
    assert result.results[0].seq == 7


def test_announce_many_splits_long_lists() -> None:
    sizes: list[int] = []

    def answer(request: httpx.Request) -> httpx.Response:
        items = json.loads(request.content)
        sizes.append(len(items))
        return httpx.Response(202, json={"accepted": len(items), "ids": ["1"] * len(items)})

    events = [Event("offsets", i, i + 1, id=f"e{i}") for i in range(2500)]
    with client_for(httpx.MockTransport(answer)) as client:
        result = client.announce(events)
    assert sizes == [1000, 1000, 500]
    assert result == Announced(accepted=2500, committed=False, job_ids=["1"] * 2500, results=[])


def test_announce_refuses_mixed_arguments() -> None:
    with client_for() as client, pytest.raises(ValueError, match="inside each event"):
        client.announce([Event("a", 1, 2)], 1, 2)  # type: ignore[call-overload]
    with client_for() as client, pytest.raises(ValueError, match="empty"):
        client.announce([])


def test_an_empty_url_is_refused() -> None:
    with pytest.raises(ValueError, match="url"):
        Client("")


@pytest.mark.anyio
async def test_the_async_client_has_the_same_methods() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(202, json={"accepted": 1, "ids": ["9"]})
        return httpx.Response(200, json=coverage_answer(True))

    async with AsyncClient("http://daemon:8080", transport=httpx.MockTransport(answer)) as client:
        answer_ = await client.coverage("a", "2025-06-14T00:00:00Z", "2025-06-14T04:00:00Z")
        announced = await client.announce("a", 1, 2)
        waited = await client.wait_covered("a", 1, 2, timeout=5)
    assert answer_.covered is True
    assert announced.job_ids == ["9"]
    assert waited.covered is True
