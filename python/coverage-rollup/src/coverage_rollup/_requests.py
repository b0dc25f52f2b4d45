"""What the sync and async clients share: how requests are built and answers read (no I/O)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any, NamedTuple
from urllib.parse import quote

import httpx

from .bounds import BoundLike, format_bound
from .errors import ApiError, Unreachable
from .models import Announced, Coverage, Event

#: The daemon takes at most this many events per ``POST /v1/events``; longer lists are split.
MAX_EVENTS_PER_REQUEST = 1000
#: Longest ``wait`` one request asks for: under the 60 s idle timeout of common proxies.
DEFAULT_WAIT_PER_REQUEST = 50.0
#: After an answer that came early without coverage (a daemon shutting down, or one too old to
#: know ``wait``), the next request waits this long first, so the loop never spins.
EARLY_ANSWER_PAUSE = 5.0
#: Headroom over the asked wait before the read of a waiting request times out.
WAIT_READ_SLACK = 30.0

Seconds = float | int | timedelta
EventLike = Event | Mapping[str, Any]


class Settings(NamedTuple):
    """What both clients hold from their arguments: the base URL, the timeouts, the longest wait
    one request asks for, and the headers of every request."""

    url: str
    timeout: httpx.Timeout
    wait_per_request: float
    headers: dict[str, str]


def settings(
    url: str,
    token: str | None,
    timeout: float,
    extra_headers: Mapping[str, str] | None,
    wait_per_request: Seconds,
) -> Settings:
    """The clients' arguments checked and read, in the order their errors are raised."""
    if not url:
        raise ValueError("url must name the daemon, e.g. http://127.0.0.1:8080")
    base = url.rstrip("/")
    timeouts = httpx.Timeout(timeout)
    per_request = seconds(wait_per_request, "wait_per_request") or 1.0
    return Settings(base, timeouts, per_request, headers(token, extra_headers))


def seconds(value: Seconds, field: str) -> float:
    s = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if s != s or s < 0:  # NaN or negative
        raise ValueError(f"{field} must be zero or more seconds, got {value!r}")
    return s


def iso_duration(secs: float) -> str:
    """``PT12.5S``: whole milliseconds, as the daemon reads durations."""
    millis = round(secs * 1000)
    whole, frac = divmod(millis, 1000)
    return f"PT{whole}.{frac:03d}S" if frac else f"PT{whole}S"


def coverage_path(asset: str) -> str:
    if not isinstance(asset, str) or not asset.strip():
        raise ValueError("asset must be a non-empty string")
    return f"/v1/assets/{quote(asset, safe='')}/coverage"


def coverage_params(
    start: BoundLike, end: BoundLike, limit: int | None, wait: float | None
) -> dict[str, str]:
    params = {"start": format_bound(start, "start"), "end": format_bound(end, "end")}
    if limit is not None:
        params["limit"] = str(int(limit))
    if wait is not None and wait > 0:
        params["wait"] = iso_duration(wait)
    return params


def request_timeout(base: httpx.Timeout, wait: float | None) -> httpx.Timeout:
    """The client's timeouts, with a read timeout long enough for the wait asked."""
    if not wait:
        return base
    read = base.read if base.read is not None else 0.0
    return httpx.Timeout(
        connect=base.connect,
        read=max(read, wait + WAIT_READ_SLACK),
        write=base.write,
        pool=base.pool,
    )


def coverage_request(
    asset: str,
    start: BoundLike,
    end: BoundLike,
    limit: int | None,
    wait: Seconds | None,
    base: httpx.Timeout,
) -> tuple[str, dict[str, Any]]:
    """The path and the request arguments of ``GET /v1/assets/{asset}/coverage``."""
    secs = None if wait is None else seconds(wait, "wait")
    return coverage_path(asset), {
        "params": coverage_params(start, end, limit, secs),
        "timeout": request_timeout(base, secs),
    }


def headers(token: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    from . import __version__

    out = {"accept": "application/json", "user-agent": f"coverage-rollup-python/{__version__}"}
    if token:
        out["authorization"] = f"Bearer {token}"
    out.update(extra or {})
    return out


def raise_for_answer(response: httpx.Response) -> None:
    if response.is_success:
        return
    raise ApiError.from_answer(response.status_code, response.content, response.headers.get("retry-after"))


def read_coverage(response: httpx.Response) -> Coverage:
    raise_for_answer(response)
    return Coverage.from_json(response.json())


def read_announced(response: httpx.Response) -> Announced:
    raise_for_answer(response)
    return Announced.from_json(response.json(), response.status_code)


def event_list(
    asset_or_events: str | Sequence[EventLike],
    start: BoundLike | None,
    end: BoundLike | None,
    version: str | None,
    id: str | None,
    extra: Mapping[str, Any] | None,
) -> list[dict[str, Any]]:
    """The JSON events of ``announce``: one from its arguments, or each of a list."""
    if isinstance(asset_or_events, str):
        if start is None or end is None:
            raise ValueError("announce(asset, start, end): start and end are required")
        return [Event(asset_or_events, start, end, version, id, extra).to_json()]
    if start is not None or end is not None or version is not None or id is not None:
        raise ValueError("announce(events): give the bounds inside each event, not as arguments")
    events = [e.to_json() if isinstance(e, Event) else dict(e) for e in asset_or_events]
    if not events:
        raise ValueError("announce(events): the list is empty")
    return events


def announce_requests(events: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The request arguments of each ``POST /v1/events`` of ``announce`` (``event_list``'s events),
    one at a time."""
    for body in chunks(events):
        yield {"content": body, "headers": {"content-type": "application/json"}}


def chunks(events: list[dict[str, Any]]) -> Iterator[bytes]:
    for i in range(0, len(events), MAX_EVENTS_PER_REQUEST):
        part = events[i : i + MAX_EVENTS_PER_REQUEST]
        yield json.dumps(part, separators=(",", ":")).encode()


def unreachable(method: str, url: str, path: str, error: httpx.TransportError) -> Unreachable:
    """A request that got no answer, naming what was asked of where."""
    return Unreachable(f"{method} {url}{path}: {error!r}")


def env_settings() -> tuple[str, str | None]:
    """``COVERAGE_ROLLUP_URL`` (default ``http://127.0.0.1:8080``) and ``COVERAGE_ROLLUP_TOKEN``."""
    url = os.environ.get("COVERAGE_ROLLUP_URL") or "http://127.0.0.1:8080"
    return url, os.environ.get("COVERAGE_ROLLUP_TOKEN") or None


class WaitLoop:
    """The steps of ``wait_covered``, without I/O: the sync and async clients drive it.

    Each round asks the daemon to wait up to ``per_request`` (never past the deadline). An answer
    that is covered, or any answer at the deadline, ends the loop. An uncovered answer that came
    well before the wait asked (a daemon shutting down, or one too old to know ``wait``) makes the
    next round pause first, so the loop never spins. Transient failures and an asset not seen yet
    are asked again (after ``Retry-After``, or a backoff from 1 s to 30 s) until the deadline,
    then raised. A wait longer than the daemon holds requests (``invalid_wait``) is halved.
    """

    def __init__(self, timeout: float, per_request: float, now: float) -> None:
        self.deadline = now + timeout
        self.per_request = per_request
        self.pause = 0.0
        self._backoff = 0.0
        self._asked_at = now
        self._asked = 0.0

    def remaining(self, now: float) -> float:
        return max(0.0, self.deadline - now)

    def sleep_before(self, now: float) -> float:
        """How long to sleep before the next request."""
        return min(self.pause, self.remaining(now))

    def wait_for(self, now: float) -> float:
        """The ``wait`` of the next request (0 at the deadline: one last plain answer)."""
        self._asked_at = now
        self._asked = min(self.per_request, self.remaining(now))
        return self._asked

    def answered(self, answer: Coverage, now: float) -> bool:
        """Whether ``answer`` ends the wait."""
        self._backoff = 0.0
        if answer.covered or self.remaining(now) <= 0:
            return True
        self.pause = EARLY_ANSWER_PAUSE if self._early(now) else 0.0
        return False

    def failed(self, error: Exception, now: float) -> None:
        """Raises ``error`` unless it is worth asking again before the deadline."""
        if isinstance(error, ApiError) and error.code == "invalid_wait" and self.per_request > 1:
            # A daemon whose http.max_wait is shorter than the waits asked: ask for half as long.
            self.per_request = max(1.0, self.per_request / 2)
            self.pause = 0.0
            return
        unknown = isinstance(error, ApiError) and error.code == "unknown_asset"
        if (not unknown and not is_retryable(error)) or self.remaining(now) <= 0:
            raise error
        retry_after = error.retry_after if isinstance(error, ApiError) else None
        if retry_after is not None:
            self.pause = retry_after
        elif unknown:
            self.pause = EARLY_ANSWER_PAUSE if self._early(now) else 0.0
        else:
            self._backoff = min(30.0, max(1.0, self._backoff * 2))
            self.pause = self._backoff

    def _early(self, now: float) -> bool:
        return self._asked > 0 and now - self._asked_at < self._asked / 2


def is_retryable(error: Exception) -> bool:
    """Worth asking again within a wait: no answer, or a daemon that is briefly unable to."""
    if isinstance(error, ApiError):
        return error.status in (429, 502, 503, 504)
    return True
