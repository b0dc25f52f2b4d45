"""The coverage check: what it reports of a partition's window, and run in a materialization."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import dagster as dg
import httpx
import pytest
from coverage_rollup import Client, Coverage

from dagster_coverage_rollup import CoverageRollupResource, build_coverage_check, coverage_result

UTC = timezone.utc
START = datetime(2026, 3, 1, 10, tzinfo=UTC)
END = datetime(2026, 3, 1, 11, tzinfo=UTC)
HOURLY = dg.HourlyPartitionsDefinition(start_date="2026-03-01-00:00", timezone="UTC")


def answer(asset: str, missing: list[tuple[str, str]], **more: Any) -> dict[str, Any]:
    total = sum(
        (datetime.fromisoformat(e[:-1]) - datetime.fromisoformat(s[:-1])).total_seconds() for s, e in missing
    )
    return {
        "asset": asset,
        "domain": "time",
        "start": "2026-03-01T10:00:00Z",
        "end": "2026-03-01T11:00:00Z",
        "covered": not missing and not more.get("replay_required"),
        "ratio": 1 - total / 3600,
        "missing": [{"start": s, "end": e} for s, e in missing],
        "replay_required": [],
        "known_gaps": [],
        "batches": [],
        "missing_count": len(missing),
        "missing_total": total,
        "known_gaps_count": 0,
        "replay_required_count": len(more.get("replay_required", [])),
        "truncated": False,
        **more,
    }


def metadata(result: dg.AssetCheckResult) -> dict[str, Any]:
    return {k: getattr(v, "value", v) for k, v in result.metadata.items()}


def test_a_covered_window_passes_with_ratio_1_and_nothing_missing() -> None:
    result = coverage_result(["o"], [Coverage.from_json(answer("o", []))], START, END)
    assert result.passed
    meta = metadata(result)
    assert meta["ratio"] == 1
    assert meta["covered"] is True
    assert meta["missing"] == []
    assert meta["window"] == "[2026-03-01T10:00:00Z, 2026-03-01T11:00:00Z)"
    assert "ratios" not in meta


def test_a_hole_fails_naming_its_range_and_replay_requirements_are_listed() -> None:
    hole = answer(
        "o",
        [("2026-03-01T10:15:00Z", "2026-03-01T10:30:00Z")],
        replay_required=[
            {
                "start": "2026-03-01T10:40:00Z",
                "end": "2026-03-01T10:45:00Z",
                "version": "v1",
                "required_version": "v2",
            }
        ],
    )
    result = coverage_result(["o"], [Coverage.from_json(hole)], START, END)
    assert not result.passed
    assert result.severity == dg.AssetCheckSeverity.ERROR
    meta = metadata(result)
    assert meta["ratio"] == 0.75
    assert meta["missing"] == [{"asset": "o", "start": "2026-03-01T10:15:00Z", "end": "2026-03-01T10:30:00Z"}]
    assert (meta["missing_count"], meta["missing_seconds"]) == (1, 900)
    assert meta["replay_required"] == [
        {
            "asset": "o",
            "start": "2026-03-01T10:40:00Z",
            "end": "2026-03-01T10:45:00Z",
            "version": "v1",
            "required_version": "v2",
        }
    ]
    assert meta["replay_required_count"] == 1
    assert "[2026-03-01T10:15:00+00:00, 2026-03-01T10:30:00+00:00)" in (result.description or "")


def test_an_asset_never_announced_is_missing_whole_and_several_assets_report_each_ratio() -> None:
    covered = Coverage.from_json(answer("a", []))
    result = coverage_result(["a", "b"], [covered, None], START, END, dg.AssetCheckSeverity.WARN)
    assert not result.passed
    assert result.severity == dg.AssetCheckSeverity.WARN
    meta = metadata(result)
    assert meta["ratios"] == {"a": 1.0, "b": 0.0}
    assert meta["ratio"] == 0
    assert meta["missing"] == [{"asset": "b", "start": "2026-03-01T10:00:00Z", "end": "2026-03-01T11:00:00Z"}]
    assert meta["missing_seconds"] == 3600
    assert result.description == "b: never announced"


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[httpx.Request]:
    """Every coverage request of the check, answered with a hole (or unknown_asset)."""
    seen: list[httpx.Request] = []

    def daemon(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if "unknown" in request.url.path:
            return httpx.Response(404, json={"code": "unknown_asset", "message": "never seen"})
        return httpx.Response(
            200, json=answer("warehouse.orders", [("2026-03-01T10:15:00Z", "2026-03-01T10:30:00Z")])
        )

    def get_client(self: CoverageRollupResource) -> Client:
        return Client(self.url, self.token, transport=httpx.MockTransport(daemon))

    monkeypatch.setattr(CoverageRollupResource, "get_client", get_client)
    return seen


@dg.asset(partitions_def=HOURLY)
def report() -> None: ...


def test_run_with_the_partition_it_asks_the_partitions_window(asked: list[httpx.Request]) -> None:
    check = build_coverage_check(report, ["warehouse.orders", "unknown.asset"])
    result = dg.materialize(
        [report, check],
        partition_key="2026-03-01-10:00",
        resources={"coverage_rollup": CoverageRollupResource(url="http://daemon:8080")},
    )
    [evaluation] = result.get_asset_check_evaluations()
    assert not evaluation.passed
    assert evaluation.check_name == "coverage"
    assert evaluation.partition == "2026-03-01-10:00"
    assert [r.url.params["start"] for r in asked] == ["2026-03-01T10:00:00+00:00"] * 2
    assert [r.url.params["end"] for r in asked] == ["2026-03-01T11:00:00+00:00"] * 2
    missing = evaluation.metadata["missing"].value
    assert json.loads(json.dumps(missing))[0]["asset"] == "warehouse.orders"


def test_unpartitioned_it_still_checks_the_window_of_the_runs_partition(
    asked: list[httpx.Request],
) -> None:
    check = build_coverage_check(report, "warehouse.orders", partitioned=False, name="cov")
    result = dg.materialize(
        [report, check],
        partition_key="2026-03-01-10:00",
        resources={"coverage_rollup": CoverageRollupResource(url="http://daemon:8080")},
    )
    [evaluation] = result.get_asset_check_evaluations()
    assert (evaluation.check_name, evaluation.partition, evaluation.passed) == ("cov", None, False)
    assert [r.url.params["start"] for r in asked] == ["2026-03-01T10:00:00+00:00"]


def test_definition_errors() -> None:
    @dg.asset
    def unpartitioned() -> None: ...

    with pytest.raises(dg.DagsterInvalidDefinitionError, match="needs partitions_def"):
        build_coverage_check(unpartitioned, "o")
    with pytest.raises(dg.DagsterInvalidDefinitionError, match="coverage_assets"):
        build_coverage_check(unpartitioned, [])
    with pytest.raises(dg.DagsterInvalidDefinitionError, match="limit"):
        build_coverage_check(unpartitioned, "o", partitions_def=HOURLY, limit=5000)
