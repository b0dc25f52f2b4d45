"""The sensor's cursor: the generation of each period it has requested a run for.

A rollup's periods follow each other, so the periods requested at one generation form long
spans: the cursor keeps disjoint [start, end) spans of epoch milliseconds with the generation
requested, neighbours of equal generation merged. Years of hourly periods requested once each
are one span; each rerun or hole still waiting splits one. The size grows with the exceptions,
not with the history.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

Span = tuple[int, int, int]

#: The cursor format; a cursor of another version is refused rather than misread.
VERSION = 1


def millis(instant: datetime) -> int:
    return round(instant.timestamp() * 1000)


class RequestedPeriods:
    """Disjoint spans [start, end) -> the generation requested, sorted by start."""

    def __init__(self, spans: Iterable[Span] = ()) -> None:
        self._spans: list[Span] = []
        for start, end, generation in sorted(spans):
            self.record(start, end, generation)

    @property
    def spans(self) -> list[Span]:
        return list(self._spans)

    def generation(self, start: int, end: int) -> int:
        """The generation requested for [start, end): the lowest one over it, 0 if any part of it
        was never requested."""
        if end <= start:
            raise ValueError(f"an empty or reversed period [{start}, {end})")
        # From the last span that starts at or before ``start``.
        i = max(0, bisect_right(self._spans, start, key=lambda span: span[0]) - 1)
        lowest: int | None = None
        at = start
        while at < end:
            if i >= len(self._spans):
                return 0
            s, e, g = self._spans[i]
            if e <= at:
                i += 1
                continue
            if s > at:
                return 0
            lowest = g if lowest is None else min(lowest, g)
            at = e
            i += 1
        return lowest or 0

    def record(self, start: int, end: int, generation: int) -> None:
        """[start, end) was requested at ``generation`` (replacing what was there)."""
        if end <= start:
            raise ValueError(f"an empty or reversed period [{start}, {end})")
        if generation < 1:
            raise ValueError(f"generation must be 1 or more, got {generation}")
        kept: list[Span] = []
        for s, e, g in self._spans:
            if e <= start or s >= end:
                kept.append((s, e, g))
                continue
            if s < start:
                kept.append((s, start, g))
            if e > end:
                kept.append((end, e, g))
        kept.append((start, end, generation))
        kept.sort()
        merged: list[Span] = []
        for s, e, g in kept:
            if merged and merged[-1][1] == s and merged[-1][2] == g:
                merged[-1] = (merged[-1][0], e, g)
            else:
                merged.append((s, e, g))
        self._spans = merged


@dataclass
class SensorCursor:
    """What a coverage sensor's cursor holds: its rollup and the periods requested."""

    rollup: str
    requested: RequestedPeriods = field(default_factory=RequestedPeriods)

    def to_json(self) -> str:
        return json.dumps(
            {"v": VERSION, "rollup": self.rollup, "requested": self.requested.spans},
            separators=(",", ":"),
        )

    @classmethod
    def parse(cls, text: str | None, rollup: str) -> SensorCursor:
        """The cursor of a previous tick; an empty one (first tick, or a cursor cleared in the UI)
        or one kept for another rollup starts afresh."""
        if not text:
            return cls(rollup)
        try:
            data = json.loads(text)
            if data.get("v") != VERSION:
                raise ValueError(f"version {data.get('v')!r}")
            spans = [(int(s), int(e), int(g)) for s, e, g in data["requested"]]
            kept_for = str(data["rollup"])
        except (ValueError, TypeError, KeyError, AttributeError) as error:
            raise ValueError(
                f"the sensor's cursor is not one this sensor writes ({error}): clear it in the UI "
                "to start afresh (runs already made are not requested again: their run keys are "
                f"known to Dagster); it was {text[:200]!r}"
            ) from error
        if kept_for != rollup:
            return cls(rollup)
        return cls(rollup, RequestedPeriods(spans))
