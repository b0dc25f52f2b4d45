"""What one sensor tick requests: a run per triggered period generation not requested before."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from .calendar import PartitionMatch
from .cursor import SensorCursor, millis
from .rollups import Period

#: Run tags the sensor sets (Dagster adds ``dagster/partition`` and ``dagster/run_key``).
TAG_ROLLUP = "coverage_rollup/rollup"
TAG_PERIOD = "coverage_rollup/period"
TAG_GENERATION = "coverage_rollup/generation"
TAG_REASON = "coverage_rollup/reason"


@dataclass(frozen=True)
class PartitionRequest:
    period: Period
    partition_key: str
    run_key: str
    tags: dict[str, str]


@dataclass
class Plan:
    requests: list[PartitionRequest] = field(default_factory=list)
    #: Triggered periods whose generation was requested on an earlier tick.
    already: int = 0
    #: Triggered periods whose partition does not exist yet (``end_offset``): requested later.
    not_yet: int = 0
    #: Left for the next ticks by ``max_requests`` (the oldest first).
    later: int = 0


def run_key(rollup: str, start: datetime, generation: int) -> str:
    """The daemon's own idempotency key of the trigger: ``orders_hourly@20250601T100000Z#2``.

    One per period generation, so Dagster (which runs a run key of a sensor once) runs a rerun,
    and never a generation twice, even with the cursor cleared.
    """
    utc = start.astimezone(timezone.utc)
    compact = utc.strftime("%Y%m%dT%H%M%S")
    if utc.microsecond:
        compact += f".{utc.microsecond:06d}"
    return f"{rollup}@{compact}Z#{generation}"


def plan_requests(
    cursor: SensorCursor,
    periods: Iterable[Period],
    match: Callable[[Period], PartitionMatch],
    max_requests: int,
) -> Plan:
    """The runs to request for ``periods`` (a listing of triggered periods), newest first, at
    most ``max_requests``; records them in ``cursor``. ``match`` maps a period to its partition
    and raises when the calendars disagree."""
    plan = Plan()
    due: list[tuple[Period, str]] = []
    for period in periods:
        if period.state != "triggered" or period.generation < 1:
            continue
        start, end = millis(period.start), millis(period.end)
        if cursor.requested.generation(start, end) >= period.generation:
            plan.already += 1
            continue
        partition = match(period)
        if not partition.exists:
            plan.not_yet += 1
            continue
        due.append((period, partition.key))
    due.sort(key=lambda d: d[0].start, reverse=True)
    plan.later = max(0, len(due) - max_requests)
    for period, key in due[:max_requests]:
        plan.requests.append(
            PartitionRequest(
                period=period,
                partition_key=key,
                run_key=run_key(cursor.rollup, period.start, period.generation),
                tags={
                    TAG_ROLLUP: cursor.rollup,
                    TAG_PERIOD: period.key,
                    TAG_GENERATION: str(period.generation),
                    TAG_REASON: period.reason or "",
                },
            )
        )
        cursor.requested.record(millis(period.start), millis(period.end), period.generation)
    return plan
