"""The asynchronous client: ``AsyncClient(url, token=None)``, the methods of ``Client`` awaited."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, overload

import httpx

from . import _requests as r
from .bounds import BoundLike
from .errors import ApiError, Unreachable
from .models import Announced, Coverage


class AsyncClient:
    """coverage-rollup over HTTP, one ``httpx.AsyncClient`` per instance (pooled; use it from one
    event loop).

    ``url`` is the daemon's base URL (``http://coverage-rollup:8080``); ``token`` a bearer token:
    a write token from ``api_tokens`` for ``announce``, a read token when ``read_tokens`` is set.
    ``transport`` replaces httpx's (tests pass an ``httpx.MockTransport``).
    """

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        headers: Mapping[str, str] | None = None,
        wait_per_request: float = r.DEFAULT_WAIT_PER_REQUEST,
        transport: httpx.AsyncBaseTransport | None = None,
        verify: bool | str = True,
    ) -> None:
        s = r.settings(url, token, timeout, headers, wait_per_request)
        self.url = s.url
        self._timeout = s.timeout
        self._wait_per_request = s.wait_per_request
        self._http = httpx.AsyncClient(
            base_url=self.url,
            headers=s.headers,
            timeout=self._timeout,
            transport=transport,
            verify=verify,
        )

    @classmethod
    def from_env(cls, **kwargs: Any) -> AsyncClient:
        """From ``COVERAGE_ROLLUP_URL`` (default ``http://127.0.0.1:8080``) and
        ``COVERAGE_ROLLUP_TOKEN``."""
        url, token = r.env_settings()
        return cls(url, token, **kwargs)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    close = aclose

    async def coverage(
        self,
        asset: str,
        start: BoundLike,
        end: BoundLike,
        *,
        limit: int | None = None,
        wait: r.Seconds | None = None,
    ) -> Coverage:
        """Whether [start, end) of ``asset`` is covered, and what is missing.

        With ``wait`` (seconds or a timedelta) the daemon holds the answer until the window is
        covered or ``wait`` has passed, whichever comes first. Raises ``ApiError`` (``code``
        ``unknown_asset`` for an asset the daemon has not seen, ``invalid_bound``, ...).
        """
        path, kwargs = r.coverage_request(asset, start, end, limit, wait, self._timeout)
        return r.read_coverage(await self._send("GET", path, **kwargs))

    @overload
    async def announce(
        self,
        asset: str,
        start: BoundLike,
        end: BoundLike,
        version: str | None = None,
        id: str | None = None,
        *,
        extra: Mapping[str, Any] | None = None,
    ) -> Announced: ...

    @overload
    async def announce(self, asset: Sequence[r.EventLike]) -> Announced: ...

    async def announce(
        self,
        asset: str | Sequence[r.EventLike],
        start: BoundLike | None = None,
        end: BoundLike | None = None,
        version: str | None = None,
        id: str | None = None,
        *,
        extra: Mapping[str, Any] | None = None,
    ) -> Announced:
        """Announces that [start, end) of ``asset`` is complete, or a list of ``Event``s (or
        event dicts in any spelling the daemon accepts), over ``POST /v1/events``.

        Needs a write token. The daemon validates every event first and takes none of a request
        when one is invalid (``ApiError`` with ``code == "invalid_events"`` and the reasons in
        ``details["errors"]``); lists longer than 1,000 go in several requests.
        """
        events = r.event_list(asset, start, end, version, id, extra)
        parts = []
        for kwargs in r.announce_requests(events):
            parts.append(r.read_announced(await self._send("POST", "/v1/events", **kwargs)))
        return Announced.combine(parts)

    async def wait_covered(
        self,
        asset: str,
        start: BoundLike,
        end: BoundLike,
        timeout: r.Seconds,
        *,
        limit: int | None = None,
        on_wait: Callable[[Coverage], Awaitable[None] | None] | None = None,
    ) -> Coverage:
        """Waits until [start, end) of ``asset`` is covered or ``timeout`` (seconds or a
        timedelta) has passed, and returns the last answer: check ``.covered``.

        Each request holds the daemon's waiting call open (``wait=``), so coverage is seen
        within milliseconds of the commit that completes it. ``on_wait`` gets every answer that
        is not covered yet (to log what is missing; it may be a coroutine function). An asset
        the daemon has not seen yet is waited for too; ``ApiError`` ``unknown_asset`` only if it
        is still unknown at the end. Transient failures (no answer, 429, 502-504) are retried
        until the deadline.
        """
        loop = r.WaitLoop(r.seconds(timeout, "timeout"), self._wait_per_request, time.monotonic())
        while True:
            await asyncio.sleep(loop.sleep_before(time.monotonic()))
            wait = loop.wait_for(time.monotonic())
            try:
                answer = await self.coverage(asset, start, end, limit=limit, wait=wait)
            except (ApiError, Unreachable) as error:
                loop.failed(error, time.monotonic())
                continue
            if loop.answered(answer, time.monotonic()):
                return answer
            if on_wait is not None:
                done = on_wait(answer)
                if inspect.isawaitable(done):
                    await done

    async def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self._http.request(method, path, **kwargs)
        except httpx.TransportError as error:
            raise r.unreachable(method, self.url, path, error) from error
