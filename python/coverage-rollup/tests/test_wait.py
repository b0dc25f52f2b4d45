"""wait_covered: the loop's steps without I/O, and the clients driving it."""

from __future__ import annotations

import httpx
import pytest

from conftest import coverage_answer
from coverage_rollup import ApiError, AsyncClient, Client, Coverage, Unreachable
from coverage_rollup import _requests as r

NOT_COVERED = Coverage.from_json(coverage_answer(False))
COVERED = Coverage.from_json(coverage_answer(True))


def test_each_request_waits_at_most_per_request_and_never_past_the_deadline() -> None:
    loop = r.WaitLoop(timeout=120, per_request=50, now=0)
    assert loop.wait_for(0) == 50
    assert loop.answered(NOT_COVERED, 50) is False
    assert loop.sleep_before(50) == 0
    assert loop.wait_for(100) == 20
    assert loop.answered(NOT_COVERED, 120) is True  # the deadline: the last answer is returned


def test_coverage_ends_the_wait() -> None:
    loop = r.WaitLoop(timeout=120, per_request=50, now=0)
    loop.wait_for(0)
    assert loop.answered(COVERED, 0.01) is True


def test_an_early_uncovered_answer_pauses_the_next_request() -> None:
    loop = r.WaitLoop(timeout=120, per_request=50, now=0)
    loop.wait_for(0)
    assert loop.answered(NOT_COVERED, 1) is False  # asked for 50 s, answered after 1 s
    assert loop.sleep_before(1) == r.EARLY_ANSWER_PAUSE


def test_transient_failures_back_off_then_raise_at_the_deadline() -> None:
    loop = r.WaitLoop(timeout=60, per_request=50, now=0)
    down = Unreachable("refused")
    loop.failed(down, 1)
    assert loop.sleep_before(1) == 1
    loop.failed(down, 2)
    assert loop.sleep_before(2) == 2
    with pytest.raises(Unreachable):
        loop.failed(down, 60)


def test_retry_after_is_honoured() -> None:
    loop = r.WaitLoop(timeout=60, per_request=50, now=0)
    loop.failed(ApiError(503, "too_many_waiters", "...", retry_after=7), 0)
    assert loop.sleep_before(0) == 7
    assert loop.sleep_before(58) == 2  # never past the deadline


def test_other_api_errors_are_raised_at_once() -> None:
    loop = r.WaitLoop(timeout=60, per_request=50, now=0)
    with pytest.raises(ApiError):
        loop.failed(ApiError(400, "invalid_bound", "..."), 0)


def test_a_wait_the_daemon_refuses_as_too_long_is_halved() -> None:
    loop = r.WaitLoop(timeout=600, per_request=50, now=0)
    too_long = ApiError(400, "invalid_wait", "wait PT50S is longer than the most this daemon holds")
    loop.failed(too_long, 0)
    assert (loop.wait_for(0), loop.sleep_before(0)) == (25, 0)
    for _ in range(5):
        loop.failed(too_long, 0)
    assert loop.wait_for(0) == 1
    with pytest.raises(ApiError):
        loop.failed(too_long, 0)  # no shorter wait to ask for


def test_an_unknown_asset_is_waited_for() -> None:
    loop = r.WaitLoop(timeout=60, per_request=50, now=0)
    loop.wait_for(0)
    loop.failed(ApiError(404, "unknown_asset", "..."), 50)
    assert loop.sleep_before(50) == 0
    with pytest.raises(ApiError):
        loop.failed(ApiError(404, "unknown_asset", "..."), 60)


def scripted(answers: list[httpx.Response]) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answers[min(len(seen), len(answers)) - 1]

    return httpx.MockTransport(answer), seen


def test_the_client_reports_each_wait_and_returns_the_covering_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(r, "EARLY_ANSWER_PAUSE", 0.01)
    transport, seen = scripted(
        [
            httpx.Response(404, json={"code": "unknown_asset", "message": "no asset named a"}),
            httpx.Response(200, json=coverage_answer(False)),
            httpx.Response(200, json=coverage_answer(True)),
        ]
    )
    waits: list[Coverage] = []
    with Client("http://daemon", transport=transport, wait_per_request=30) as client:
        answer = client.wait_covered("a", 1, 2, timeout=60, on_wait=waits.append)
    assert answer.covered is True
    assert [w.covered for w in waits] == [False]
    assert all(req.url.params["wait"] in ("PT30S",) for req in seen)


def test_at_the_timeout_the_last_answer_says_what_is_missing() -> None:
    transport, _ = scripted([httpx.Response(200, json=coverage_answer(False))])
    with Client("http://daemon", transport=transport) as client:
        answer = client.wait_covered("a", 1, 2, timeout=0)
    assert answer.covered is False
    assert answer.missing_count == 1


@pytest.mark.anyio
async def test_the_async_client_awaits_a_coroutine_on_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(r, "EARLY_ANSWER_PAUSE", 0.01)
    transport, _ = scripted(
        [
            httpx.Response(200, json=coverage_answer(False)),
            httpx.Response(200, json=coverage_answer(True)),
        ]
    )
    logged: list[str] = []

    async def log(answer: Coverage) -> None:
        logged.append(answer.describe_missing())

    async with AsyncClient("http://daemon", transport=transport) as client:
        answer = await client.wait_covered("a", 1, 2, timeout=60, on_wait=log)
    assert answer.covered is True
    assert logged == ["[2025-06-14T03:10:00+00:00, 2025-06-14T03:25:00+00:00)"]
