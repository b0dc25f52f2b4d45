"""A rollup and its periods over HTTP: ``GET /v1/rollups`` and ``GET /v1/rollups/{id}/periods``.

The ``coverage-rollup`` client answers coverage questions about assets; the sensor also needs a
rollup's periods (which are triggered, at which generation), which that client does not read yet,
so they are read here, with its bounds and errors.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

import httpx
from coverage_rollup import ApiError, Unreachable
from coverage_rollup.bounds import parse_instant

#: The most periods one listing page holds (the daemon's own limit).
MAX_PAGE = 10_000


@dataclass(frozen=True)
class RollupCalendar:
    """What the daemon says of a rollup's calendar (``GET /v1/rollups``)."""

    id: str
    #: ``hour``, ``day``, ``week``, ``month``, ``quarter``, ``year``, an ISO 8601 duration, or an
    #: integer width for an integer rollup.
    every: str | int
    timezone: str
    begin: str | int
    upstream: tuple[str, ...]


@dataclass(frozen=True)
class Period:
    """One period of a time rollup, as the period listing answers it."""

    start: datetime
    end: datetime
    key: str
    state: str
    ratio: float
    #: 0 before the first trigger; each rerun adds one.
    generation: int
    reason: str | None
    triggered_at: datetime | None

    @classmethod
    def from_json(cls, rollup: str, item: Mapping[str, Any]) -> Period:
        start, end = item["start"], item["end"]
        if not isinstance(start, str) or not isinstance(end, str):
            raise NotATimeRollup(rollup)
        triggered_at = item.get("triggered_at")
        return cls(
            start=parse_instant(start),
            end=parse_instant(end),
            key=str(item["key"]),
            state=str(item["state"]),
            ratio=float(item["ratio"]),
            generation=int(item["generation"]),
            reason=item.get("reason"),
            triggered_at=None if triggered_at is None else parse_instant(triggered_at),
        )


@dataclass(frozen=True)
class PeriodPage:
    periods: list[Period]
    #: Periods of the whole window by state (``waiting``, ``triggered``, ...).
    counts: Mapping[str, int]
    next_cursor: str | None


def utc_iso(instant: datetime) -> str:
    """``2025-06-01T10:00:00Z``: an aware datetime in the form the daemon writes."""
    if instant.tzinfo is None:
        raise ValueError(f"{instant!r} has no time zone")
    text = instant.astimezone(timezone.utc).isoformat()
    return text.removesuffix("+00:00") + "Z"


class NotATimeRollup(ValueError):
    def __init__(self, rollup: str) -> None:
        super().__init__(
            f"rollup {rollup!r} has integer periods: only a time rollup maps to the partitions of "
            "a TimeWindowPartitionsDefinition"
        )


class Rollups:
    """The rollup reads the sensor needs, over one pooled ``httpx.Client`` (close it after use)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        user_agent: str = "dagster-coverage-rollup",
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"accept": "application/json", "user-agent": user_agent}
        if token:
            headers["authorization"] = f"Bearer {token}"
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, transport=transport)

    def __enter__(self) -> Rollups:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def calendar(self, rollup: str) -> RollupCalendar:
        """The rollup's calendar; ``ApiError`` ``unknown_rollup`` (404) if no such rollup exists."""
        cursor: str | None = None
        while True:
            params = {"q": rollup, "limit": "1000"}
            if cursor is not None:
                params["cursor"] = cursor
            answer = self._get("/v1/rollups", params)
            for item in answer["rollups"]:
                if item["id"] == rollup:
                    return RollupCalendar(
                        id=item["id"],
                        every=item["every"],
                        timezone=item["timezone"],
                        begin=item["begin"],
                        upstream=tuple(item["upstream"]),
                    )
            cursor = answer.get("next_cursor")
            if cursor is None:
                raise ApiError(404, "unknown_rollup", f"no rollup {rollup!r} is configured")

    def page(
        self,
        rollup: str,
        start: datetime,
        end: datetime,
        *,
        state: str | None = None,
        order: str = "asc",
        limit: int = MAX_PAGE,
        cursor: str | None = None,
    ) -> PeriodPage:
        """One page of the periods overlapping [start, end) (stored or derived)."""
        params = {
            "start": utc_iso(start),
            "end": utc_iso(end),
            "order": order,
            "limit": str(limit),
        }
        if state is not None:
            params["state"] = state
        if cursor is not None:
            params["cursor"] = cursor
        answer = self._get(f"/v1/rollups/{quote(rollup, safe='')}/periods", params)
        return PeriodPage(
            periods=[Period.from_json(rollup, p) for p in answer["periods"]],
            counts=dict(answer.get("counts", {})),
            next_cursor=answer.get("next_cursor"),
        )

    def periods(
        self, rollup: str, start: datetime, end: datetime, *, state: str | None = None
    ) -> Iterator[PeriodPage]:
        """Every page of the window, oldest periods first."""
        cursor: str | None = None
        while True:
            page = self.page(rollup, start, end, state=state, cursor=cursor)
            yield page
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def _get(self, path: str, params: Mapping[str, str]) -> Any:
        try:
            response = self._http.get(path, params=params)
        except httpx.TransportError as error:
            raise Unreachable(f"GET {self.url}{path}: {error!r}") from error
        if not response.is_success:
            raise ApiError.from_answer(
                response.status_code, response.content, response.headers.get("retry-after")
            )
        return response.json()
