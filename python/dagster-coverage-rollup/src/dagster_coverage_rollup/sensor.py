"""``build_coverage_rollup_sensor``: a run per covered period of a rollup, as its time partition."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

import dagster as dg

from .calendar import (
    CalendarMismatchError,
    PartitionMatch,
    partition_for_period,
    require_time_windows,
)
from .cursor import SensorCursor
from .plan import Plan, plan_requests
from .resource import CoverageRollupResource
from .rollups import Period, Rollups

#: Period states, in the order the sensor's skip message names them.
_WAITING_STATES = ("waiting", "settling", "rerun_pending", "missed")


def build_coverage_rollup_sensor(
    rollup: str,
    *,
    target: Any,
    partitions_def: dg.PartitionsDefinition | None = None,
    name: str | None = None,
    resource_key: str = "coverage_rollup",
    minimum_interval_seconds: int = 30,
    lookback: timedelta | None = None,
    max_runs_per_tick: int = 100,
    tags: Mapping[str, str] | None = None,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED,
    description: str | None = None,
) -> dg.SensorDefinition:
    """A sensor that requests one run of ``target`` per period generation coverage-rollup
    triggered for ``rollup``, for the partition of ``partitions_def`` that is the period.

    - A period is requested once it is ``triggered`` (its wait policy is satisfied: by default
      every upstream covers it), so a partition with a hole is not run, and is run once the hole
      is filled (a late event, a repair request answered), however old it is.
    - A rerun (a new generation after a replay requirement or a manual trigger) is requested
      again, under a run key of its own: the daemon's idempotency key of the trigger,
      ``{rollup}@{period start}#{generation}``. Dagster runs a run key of a sensor once.
    - The cursor keeps which generation of which period was requested (compactly: spans of
      periods). Clearing it in the UI requests nothing twice (the run keys are known).
    - The rollup's periods must be the partitions: each one is matched by its time window, and a
      rollup whose calendar disagrees with ``partitions_def`` fails the tick, naming both.

    ``target`` is what each run materializes (assets, an asset selection or a job);
    ``partitions_def`` defaults to the target's. ``lookback`` bounds how far back each tick reads
    (default: the whole partitions definition); ``max_runs_per_tick`` bounds the runs requested
    per tick, newest periods first, the rest on the next ticks. The resource is read from
    ``resource_key`` (a ``CoverageRollupResource``).
    """
    if not rollup or not isinstance(rollup, str):
        raise dg.DagsterInvalidDefinitionError("rollup must be the id of a rollup of the daemon")
    if partitions_def is None:
        partitions_def = getattr(target, "partitions_def", None)
    windows = require_time_windows(partitions_def, f"the coverage sensor of rollup {rollup!r}")
    if max_runs_per_tick < 1:
        raise dg.DagsterInvalidDefinitionError(
            f"max_runs_per_tick must be 1 or more, got {max_runs_per_tick}"
        )
    if lookback is not None and lookback <= timedelta(0):
        raise dg.DagsterInvalidDefinitionError(f"lookback must be positive, got {lookback}")
    extra_tags = dict(tags or {})

    @dg.sensor(
        name=name or f"{re.sub(r'[^A-Za-z0-9_]', '_', rollup)}_covered_periods",
        target=target,
        minimum_interval_seconds=minimum_interval_seconds,
        required_resource_keys={resource_key},
        default_status=default_status,
        description=description
        or f"A run per period of coverage-rollup's rollup {rollup} once it is covered",
    )
    def _sensor(context: dg.SensorEvaluationContext, **_resources: Any) -> dg.SensorResult:
        # Dagster passes required resources as keywords when a test calls the sensor directly,
        # and only on the context when it evaluates a tick: read them from the context.
        resource: CoverageRollupResource = getattr(context.resources, resource_key)
        cursor = SensorCursor.parse(context.cursor, rollup)
        first = windows.get_first_partition_window()
        last = windows.get_last_partition_window()
        if first is None or last is None:
            return dg.SensorResult(
                skip_reason="the partitions definition has no partition yet",
                cursor=cursor.to_json(),
            )
        start = first.start if lookback is None else max(first.start, last.end - lookback)
        with resource.get_rollups() as api:
            match = _matcher(api, rollup, windows)
            latest = api.page(rollup, start, last.end, order="desc", limit=1).periods
            if latest:  # one period proves the calendars agree before anything is requested
                match(latest[0])
            periods: list[Period] = []
            counts: Mapping[str, int] = {}
            for page in api.periods(rollup, start, last.end, state="triggered"):
                periods.extend(page.periods)
                counts = page.counts
        plan = plan_requests(cursor, periods, match, max_runs_per_tick)
        for request in plan.requests:
            context.log.info(
                f"period {request.period.key} of {rollup}, generation "
                f"{request.period.generation} ({request.period.reason}): partition "
                f"{request.partition_key}, run key {request.run_key}"
            )
        if not plan.requests:
            return dg.SensorResult(skip_reason=_nothing_new(rollup, plan, counts), cursor=None)
        if plan.later:
            context.log.info(f"{plan.later} more covered periods are requested on the next ticks")
        return dg.SensorResult(
            run_requests=[
                dg.RunRequest(
                    run_key=r.run_key,
                    partition_key=r.partition_key,
                    tags={**extra_tags, **r.tags},
                )
                for r in plan.requests
            ],
            cursor=cursor.to_json(),
        )

    return _sensor


def _matcher(
    api: Rollups, rollup: str, windows: dg.TimeWindowPartitionsDefinition
) -> Callable[[Period], PartitionMatch]:
    def match(period: Period) -> PartitionMatch:
        try:
            return partition_for_period(windows, period.start, period.end, period_key=period.key)
        except CalendarMismatchError:
            # Again with the rollup's calendar in the message, read only now that it is needed.
            return partition_for_period(
                windows,
                period.start,
                period.end,
                rollup=api.calendar(rollup),
                period_key=period.key,
            )

    return match


def _nothing_new(rollup: str, plan: Plan, counts: Mapping[str, int]) -> str:
    waiting: Sequence[str] = [f"{counts[s]} {s}" for s in _WAITING_STATES if counts.get(s)]
    parts = [f"no new covered period of rollup {rollup}: {plan.already} requested before"]
    if plan.not_yet:
        parts.append(f"{plan.not_yet} whose partition does not exist yet")
    if waiting:
        parts.append("in the window " + ", ".join(waiting))
    return "; ".join(parts)
