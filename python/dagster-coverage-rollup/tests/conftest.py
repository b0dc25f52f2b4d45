from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import unquote

import httpx
import pytest

from dagster_coverage_rollup import CoverageRollupResource, Rollups

UTC = timezone.utc


def iso(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")


class StandInDaemon:
    """The two listings the sensor reads, answered from a list of periods as the daemon shapes
    them (field names of its OpenAPI document), pages of ``page_size``."""

    def __init__(self, rollup: str = "orders_hourly", every: str | int = "hour") -> None:
        self.rollup = rollup
        self.every = every
        self.periods: list[dict[str, Any]] = []
        self.page_size = 10_000
        self.requests: list[httpx.Request] = []

    def hours(self, first: datetime, count: int) -> None:
        for h in range(count):
            start = first + timedelta(hours=h)
            self.periods.append(
                {
                    "start": iso(start),
                    "end": iso(start + timedelta(hours=1)),
                    "key": start.strftime("%Y-%m-%dT%H"),
                    "state": "waiting",
                    "ratio": 0,
                    "ratios": {},
                    "generation": 0,
                    "reason": None,
                    "triggered_at": None,
                    "run": None,
                }
            )

    def set(self, key: str, state: str, generation: int, reason: str | None = "covered") -> None:
        for p in self.periods:
            if p["key"] == key:
                p.update(state=state, generation=generation, reason=reason, ratio=1)
                p["triggered_at"] = p["end"] if generation else None
                return
        raise KeyError(key)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = unquote(request.url.path)
        q = request.url.params
        if path == "/v1/rollups":
            rollup = {
                "id": self.rollup,
                "upstream": ["warehouse.orders"],
                "every": self.every,
                "timezone": "UTC",
                "begin": "2026-01-01T00:00:00Z",
            }
            return httpx.Response(200, json={"rollups": [rollup], "total": 1, "next_cursor": None})
        if path != f"/v1/rollups/{self.rollup}/periods":
            return httpx.Response(404, json={"code": "unknown_rollup", "message": path})
        start, end = q["start"], q["end"]
        chosen = [
            p
            for p in self.periods
            if p["end"] > start and p["start"] < end and q.get("state", p["state"]) == p["state"]
        ]
        if q.get("order") == "desc":
            chosen.reverse()
        at = int(q.get("cursor", "0"))
        limit = min(int(q.get("limit", "500")), self.page_size)
        page = chosen[at : at + limit]
        counts: dict[str, int] = {}
        for p in self.periods:
            if p["end"] > start and p["start"] < end:
                counts[p["state"]] = counts.get(p["state"], 0) + 1
        more = at + limit < len(chosen)
        return httpx.Response(
            200,
            json={
                "periods": page,
                "counts": counts,
                "next_cursor": str(at + limit) if more else None,
            },
        )


@pytest.fixture
def daemon(monkeypatch: pytest.MonkeyPatch) -> StandInDaemon:
    """A stand-in daemon behind every ``CoverageRollupResource.get_rollups()``."""
    stand_in = StandInDaemon()

    def get_rollups(self: CoverageRollupResource) -> Rollups:
        return Rollups(self.url, self.token, transport=httpx.MockTransport(stand_in.handle))

    monkeypatch.setattr(CoverageRollupResource, "get_rollups", get_rollups)
    return stand_in
