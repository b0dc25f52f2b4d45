"""A rollup's period as a partition of a ``TimeWindowPartitionsDefinition``, exactly or not at all.

A period maps to the partition whose time window is the period itself: the partition containing
the period's start must start and end where the period does. Anything else means the rollup's
calendar (``every``, ``timezone``) and the partitions definition (cron schedule, timezone)
disagree, and requesting a run of a neighbouring partition would be wrong, so it is refused.
Comparing windows instead of names accepts every agreeing pair whatever the spelling: an hourly
rollup in UTC and hourly partitions in Europe/Paris have the same windows under different keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import dagster as dg

from .rollups import RollupCalendar


class CalendarMismatchError(Exception):
    """The rollup's periods are not the partitions of the partitions definition."""


@dataclass(frozen=True)
class PartitionMatch:
    key: str
    #: False for a partition outside the definition (before its start, or not begun by its
    #: ``end_offset``): its run is requested once it exists.
    exists: bool


def require_time_windows(
    partitions_def: dg.PartitionsDefinition | None, what: str
) -> dg.TimeWindowPartitionsDefinition:
    """The partitions definition, refused at definition time unless made of time windows."""
    if partitions_def is None:
        raise dg.DagsterInvalidDefinitionError(
            f"{what} needs partitions_def, a TimeWindowPartitionsDefinition (hourly, daily, ...), "
            "or a target whose assets have one"
        )
    if not isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
        raise dg.DagsterInvalidDefinitionError(
            f"{what} maps a rollup's periods to time partitions: partitions_def must be a "
            f"TimeWindowPartitionsDefinition (HourlyPartitionsDefinition, ...), "
            f"not {type(partitions_def).__name__}"
        )
    return partitions_def


def describe(partitions_def: dg.TimeWindowPartitionsDefinition) -> str:
    return f"cron {partitions_def.cron_schedule!r} in {partitions_def.timezone}"


def partition_for_period(
    partitions_def: dg.TimeWindowPartitionsDefinition,
    start: datetime,
    end: datetime,
    *,
    rollup: RollupCalendar | None = None,
    period_key: str | None = None,
) -> PartitionMatch:
    """The partition whose window is [start, end); ``CalendarMismatchError`` if there is none."""
    key = partitions_def.get_partition_key_for_timestamp(start.timestamp())
    window = partitions_def.time_window_for_partition_key(key)
    if not (_same(window.start, start) and _same(window.end, end)):
        of = f"rollup {rollup.id!r} " if rollup else "the rollup's "
        calendar = f" (every {rollup.every}, timezone {rollup.timezone})" if rollup else ""
        raise CalendarMismatchError(
            f"{of}period {period_key or start.isoformat()} is [{start.isoformat()}, "
            f"{end.isoformat()}){calendar}, but the partition of the partitions definition "
            f"({describe(partitions_def)}) that contains its start is {key!r}, "
            f"[{window.start.isoformat()}, {window.end.isoformat()}): the rollup's calendar and "
            "the partitions definition disagree; give the rollup the same period and zone as "
            "the partitions (or the partitions those of the rollup)"
        )
    return PartitionMatch(key=key, exists=partitions_def.has_partition_key(key))


def _same(a: datetime, b: datetime) -> bool:
    return round(a.timestamp() * 1000) == round(b.timestamp() * 1000)
