"""``build_coverage_check``: an asset check of how much of a partition's window is covered.

(No ``from __future__ import annotations`` here: Dagster reads the check's context annotation.)
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import dagster as dg
from coverage_rollup import ApiError, Coverage

from .calendar import require_time_windows
from .resource import CoverageRollupResource
from .rollups import utc_iso


def build_coverage_check(
    asset: Any,
    coverage_assets: str | Sequence[str],
    *,
    partitions_def: dg.PartitionsDefinition | None = None,
    partitioned: bool = True,
    name: str = "coverage",
    resource_key: str = "coverage_rollup",
    blocking: bool = False,
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR,
    limit: int = 100,
    description: str | None = None,
) -> dg.AssetChecksDefinition:
    """A partitioned asset check on ``asset``: is the partition's time window covered in each of
    ``coverage_assets`` (asset names of coverage-rollup, e.g. ``warehouse.orders``)?

    It passes when every one covers the whole window, and reports as metadata ``ratio`` (the
    smallest), ``covered``, ``missing`` (``[{asset, start, end}]``, at most ``limit`` per asset),
    ``missing_count``, ``missing_seconds``, ``replay_required`` (``[{asset, start, end, version,
    required_version}]``) and ``replay_required_count``; with several assets, ``ratios`` per
    asset. An asset coverage-rollup has never seen counts as not covered at all.
    ``partitions_def`` defaults to the asset's (it must be the asset's, a
    ``TimeWindowPartitionsDefinition``). Runs that materialize a partition of ``asset`` run the
    check for that partition too; ``blocking=True`` keeps its downstream assets from running when
    the window was not covered.

    ``partitioned=True`` records a result per partition (Dagster's partitioned asset checks, a
    preview feature in Dagster 1.13 that warns so when the code location loads);
    ``partitioned=False`` makes an unpartitioned check that still checks the window of the
    partition its run materializes, and keeps only the latest result.
    """
    names = [coverage_assets] if isinstance(coverage_assets, str) else list(coverage_assets)
    if not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise dg.DagsterInvalidDefinitionError(
            "coverage_assets must name coverage-rollup assets, e.g. 'warehouse.orders'"
        )
    if not 0 <= limit <= 1000:
        raise dg.DagsterInvalidDefinitionError(f"limit must be 0 to 1000, got {limit}")
    if partitions_def is None:
        partitions_def = getattr(asset, "partitions_def", None)
    windows = require_time_windows(partitions_def, f"the coverage check {name!r}")

    @dg.asset_check(
        asset=asset,
        name=name,
        partitions_def=windows if partitioned else None,
        blocking=blocking,
        required_resource_keys={resource_key},
        description=description
        or f"Whether coverage-rollup saw each partition's window complete in {', '.join(names)}",
    )
    def _check(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        resource: CoverageRollupResource = getattr(context.resources, resource_key)
        start, end = _window(context, windows, name)
        with resource.get_client() as client:
            answers = [_coverage(client, n, start, end, limit) for n in names]
        return coverage_result(names, answers, start, end, severity)

    return _check


def _window(
    context: dg.AssetCheckExecutionContext, windows: dg.TimeWindowPartitionsDefinition, name: str
) -> tuple[datetime, datetime]:
    """The window of the run's partition, or of its partition range (a single-run backfill)."""
    if context.has_partition_key:
        first = last = context.partition_key
    elif context.has_partition_key_range:
        first, last = context.partition_key_range.start, context.partition_key_range.end
    else:
        raise dg.Failure(
            f"the coverage check {name!r} checks a partition's window: run it with a partition of the asset"
        )
    return (
        windows.time_window_for_partition_key(first).start,
        windows.time_window_for_partition_key(last).end,
    )


def _coverage(client: Any, asset: str, start: datetime, end: datetime, limit: int) -> Coverage | None:
    try:
        answer: Coverage = client.coverage(asset, start, end, limit=limit)
    except ApiError as error:
        if error.code == "unknown_asset":
            return None
        raise
    return answer


def coverage_result(
    names: Sequence[str],
    answers: Sequence[Coverage | None],
    start: datetime,
    end: datetime,
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR,
) -> dg.AssetCheckResult:
    """The check's result from the coverage answers of ``names`` (None: an unknown asset)."""
    whole = (end - start).total_seconds()
    missing: list[dict[str, Any]] = []
    replay: list[dict[str, Any]] = []
    ratios: dict[str, float] = {}
    missing_count = replay_count = 0
    missing_seconds = 0.0
    lines: list[str] = []
    for name, answer in zip(names, answers, strict=True):
        if answer is None:
            ratios[name] = 0.0
            missing.append({"asset": name, "start": utc_iso(start), "end": utc_iso(end)})
            missing_count += 1
            missing_seconds += whole
            lines.append(f"{name}: never announced")
            continue
        ratios[name] = answer.ratio
        missing += [{"asset": name, "start": _iso(s), "end": _iso(e)} for s, e in answer.missing]
        replay += [
            {
                "asset": name,
                "start": _iso(r.start),
                "end": _iso(r.end),
                "version": r.version,
                "required_version": r.required_version,
            }
            for r in answer.replay_required
        ]
        missing_count += answer.missing_count
        replay_count += answer.replay_required_count
        missing_seconds += answer.missing_total
        if not answer.covered:
            lines.append(f"{name}: {answer.describe_missing()}")
    covered = all(a is not None and a.covered for a in answers)
    metadata: dict[str, Any] = {
        "ratio": dg.MetadataValue.float(min(ratios.values())),
        "covered": dg.MetadataValue.bool(covered),
        "window": dg.MetadataValue.text(f"[{utc_iso(start)}, {utc_iso(end)})"),
        "missing": dg.MetadataValue.json(missing),
        "missing_count": dg.MetadataValue.int(missing_count),
        "missing_seconds": dg.MetadataValue.float(missing_seconds),
        "replay_required": dg.MetadataValue.json(replay),
        "replay_required_count": dg.MetadataValue.int(replay_count),
    }
    if len(names) > 1:
        metadata["ratios"] = dg.MetadataValue.json(ratios)
    return dg.AssetCheckResult(
        passed=covered,
        severity=severity,
        metadata=metadata,
        description="covered" if covered else "; ".join(lines),
    )


def _iso(bound: datetime | int) -> str:
    return utc_iso(bound) if isinstance(bound, datetime) else str(bound)
