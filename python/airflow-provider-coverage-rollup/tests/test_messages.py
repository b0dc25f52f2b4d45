"""The log lines a waiting sensor writes: what is missing, bounds as the daemon wrote them."""

from typing import Any

from coverage_rollup import Coverage

from coverage_rollup_airflow._messages import covered, not_covered, nothing_seen


def answer(**fields: Any) -> Coverage:
    body: dict[str, Any] = {
        "asset": "sensor.in",
        "domain": "time",
        "start": "2025-06-01T05:00:00Z",
        "end": "2025-06-01T06:00:00Z",
        "covered": False,
        "ratio": 0.5,
        "missing": [{"start": "2025-06-01T05:30:00Z", "end": "2025-06-01T06:00:00Z"}],
        "missing_count": 1,
        "replay_required": [],
        "replay_required_count": 0,
    }
    body.update(fields)
    return Coverage.from_json(body)


def test_the_missing_ranges() -> None:
    assert not_covered(answer()) == (
        "sensor.in [2025-06-01T05:00:00Z, 2025-06-01T06:00:00Z) not covered: ratio 0.5, "
        "missing 1 range(s): [2025-06-01T05:30:00Z, 2025-06-01T06:00:00Z)"
    )


def test_a_long_list_says_how_many_more() -> None:
    missing = [{"start": i, "end": i + 1} for i in range(0, 40, 2)]
    line = not_covered(
        answer(domain="integer", start=0, end=100, missing=missing, missing_count=57, ratio=0.43)
    )
    assert line.startswith("sensor.in [0, 100) not covered: ratio 0.43, missing 57 range(s): [0, 1), ")
    assert line.endswith("[18, 19) and 47 more")


def test_ranges_to_replay() -> None:
    line = not_covered(
        answer(
            ratio=1,
            missing=[],
            missing_count=0,
            replay_required=[
                {
                    "start": "2025-06-01T05:00:00Z",
                    "end": "2025-06-01T05:10:00Z",
                    "version": "v1",
                    "required_version": "v2",
                }
            ],
            replay_required_count=1,
        )
    )
    assert line.endswith(
        "missing 0 range(s); replay required for 1 range(s): "
        "[2025-06-01T05:00:00Z, 2025-06-01T05:10:00Z) at v2"
    )


def test_the_other_lines() -> None:
    assert nothing_seen("a", 1, 2) == "a [1, 2) not covered: nothing seen yet"
    assert covered("a", "x", "y", 1.0) == "a [x, y) covered (ratio 1)"
