"""Typed answers of the coverage-rollup HTTP API, and the event a producer announces."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from .bounds import Bound, BoundLike, json_bound, parse_bound, parse_instant

Domain = Literal["time", "integer"]
Range = tuple[Bound, Bound]


@dataclass(frozen=True)
class ReplayRequired:
    """A range to rebuild: its newest completion's version is not the required one."""

    start: Bound
    end: Bound
    version: str | None
    required_version: str


@dataclass(frozen=True)
class Batch:
    """One piece of the window, nearest its end first: complete, gap or replay_required."""

    start: Bound
    end: Bound
    state: Literal["complete", "gap", "replay_required"]
    version: str | None


@dataclass(frozen=True)
class Coverage:
    """``GET /v1/assets/{asset}/coverage``: whether [start, end) is covered and what is missing.

    ``missing``, ``known_gaps``, ``replay_required`` and ``batches`` hold at most ``limit``
    entries; ``covered``, ``ratio`` and the totals are exact whatever the limit.
    """

    asset: str
    domain: Domain
    start: Bound
    end: Bound
    covered: bool
    ratio: float
    missing: list[Range]
    replay_required: list[ReplayRequired]
    known_gaps: list[Range]
    batches: list[Batch]
    missing_count: int
    #: Seconds for time assets, values for integer assets.
    missing_total: float
    known_gaps_count: int
    replay_required_count: int
    truncated: bool
    covered_until: Bound | None
    lag_seconds: float | None
    last_event_at: datetime | None
    stale: bool | None
    #: The answer as the daemon sent it, fields this client does not model included.
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, answer: Mapping[str, Any]) -> Coverage:
        domain = answer["domain"]

        def bound(value: object) -> Bound:
            return parse_bound(value, domain)

        def ranges(items: list[Mapping[str, Any]]) -> list[Range]:
            return [(bound(r["start"]), bound(r["end"])) for r in items]

        covered_until = answer.get("covered_until")
        last_event_at = answer.get("last_event_at")
        return cls(
            asset=answer["asset"],
            domain=domain,
            start=bound(answer["start"]),
            end=bound(answer["end"]),
            covered=bool(answer["covered"]),
            ratio=float(answer["ratio"]),
            missing=ranges(answer.get("missing", [])),
            replay_required=[
                ReplayRequired(
                    start=bound(r["start"]),
                    end=bound(r["end"]),
                    version=r.get("version"),
                    required_version=r["required_version"],
                )
                for r in answer.get("replay_required", [])
            ],
            known_gaps=ranges(answer.get("known_gaps", [])),
            batches=[
                Batch(
                    start=bound(b["start"]),
                    end=bound(b["end"]),
                    state=b["state"],
                    version=b.get("version"),
                )
                for b in answer.get("batches", [])
            ],
            missing_count=int(answer.get("missing_count", 0)),
            missing_total=float(answer.get("missing_total", 0)),
            known_gaps_count=int(answer.get("known_gaps_count", 0)),
            replay_required_count=int(answer.get("replay_required_count", 0)),
            truncated=bool(answer.get("truncated", False)),
            covered_until=None if covered_until is None else bound(covered_until),
            lag_seconds=answer.get("lag_seconds"),
            last_event_at=None if last_event_at is None else parse_instant(last_event_at),
            stale=answer.get("stale"),
            raw=answer,
        )

    def describe_missing(self, most: int = 10) -> str:
        """The missing and replay-required ranges in one line, for logs: ``[a, b), [c, d) ...``."""
        parts = [f"[{_show(s)}, {_show(e)})" for s, e in self.missing[:most]]
        parts += [
            f"[{_show(r.start)}, {_show(r.end)}) replay at {r.required_version}"
            for r in self.replay_required[: max(0, most - len(parts))]
        ]
        hidden = self.missing_count + self.replay_required_count - len(parts)
        return ", ".join(parts) + (f" and {hidden} more" if hidden > 0 else "")


def _show(bound: Bound) -> str:
    return bound.isoformat() if isinstance(bound, datetime) else str(bound)


@dataclass(frozen=True)
class Event:
    """One completion: [start, end) of ``asset`` is complete (at ``version``, if given).

    A stable ``id`` per slice makes a redelivery harmless: the daemon ingests an id once.
    """

    asset: str
    start: BoundLike
    end: BoundLike
    version: str | None = None
    id: str | None = None
    extra: Mapping[str, Any] | None = None
    produced_at: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        """The canonical event, as the queue and ``POST /v1/events`` take it."""
        if not isinstance(self.asset, str) or not self.asset.strip():
            raise ValueError("asset must be a non-empty string")
        body: dict[str, Any] = {
            "asset": self.asset,
            "start": json_bound(self.start, "start"),
            "end": json_bound(self.end, "end"),
        }
        if self.version is not None:
            body["version"] = self.version
        if self.id is not None:
            body["id"] = self.id
        if self.produced_at is not None:
            body["produced_at"] = json_bound(self.produced_at, "produced_at")
        if self.extra is not None:
            body["extra"] = dict(self.extra)
        return body


@dataclass(frozen=True)
class IngestResult:
    """What the index did with one event committed before the answer."""

    status: Literal["committed", "duplicate"]
    asset: str
    #: The event's position in the asset's ingest order (committed events only).
    seq: int | None = None


@dataclass(frozen=True)
class Announced:
    """The answer of ``POST /v1/events`` (several requests' answers summed for a long list).

    ``committed`` is true where the queue is in PostgreSQL: the events were in the index before
    the answer, and ``results`` says per event whether it was new. On Redis they were enqueued
    (``job_ids``) and are indexed shortly after.
    """

    accepted: int
    committed: bool
    job_ids: list[str | None]
    results: list[IngestResult]

    @classmethod
    def from_json(cls, answer: Mapping[str, Any], status: int) -> Announced:
        results = [
            IngestResult(status=r["status"], asset=r["asset"], seq=r.get("seq"))
            for r in answer.get("results", [])
        ]
        return cls(
            accepted=int(answer["accepted"]),
            committed=status == 200,
            job_ids=list(answer.get("ids", [])),
            results=results,
        )

    @classmethod
    def combine(cls, parts: list[Announced]) -> Announced:
        return cls(
            accepted=sum(p.accepted for p in parts),
            committed=all(p.committed for p in parts),
            job_ids=[i for p in parts for i in p.job_ids],
            results=[r for p in parts for r in p.results],
        )
