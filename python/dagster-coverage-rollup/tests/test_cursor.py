"""The cursor's spans against a brute-force model: one generation per unit of time."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dagster_coverage_rollup import RequestedPeriods, SensorCursor

UNITS = 40

period = st.tuples(st.integers(0, UNITS - 1), st.integers(1, 8)).map(
    lambda p: (p[0], min(UNITS, p[0] + p[1]))
)
records = st.lists(st.tuples(period, st.integers(1, 4)), max_size=30)


def model_generation(cells: dict[int, int], start: int, end: int) -> int:
    return min(cells.get(u, 0) for u in range(start, end))


@settings(max_examples=400)
@given(records, st.lists(period, min_size=1, max_size=10))
def test_spans_answer_what_each_unit_was_requested_at(
    recorded: list[tuple[tuple[int, int], int]], asked: list[tuple[int, int]]
) -> None:
    spans = RequestedPeriods()
    cells: dict[int, int] = {}
    for (start, end), generation in recorded:
        spans.record(start, end, generation)
        for u in range(start, end):
            cells[u] = generation
    for start, end in asked:
        assert spans.generation(start, end) == model_generation(cells, start, end)
    # Disjoint, sorted, and neighbours of equal generation merged: the cursor stays compact.
    listed = spans.spans
    for (s1, e1, g1), (s2, _, g2) in itertools.pairwise(listed):
        assert s1 < e1 <= s2
        assert not (e1 == s2 and g1 == g2)
    # A cursor written and read back answers the same.
    again = SensorCursor.parse(SensorCursor("r", spans).to_json(), "r").requested
    assert again.spans == listed


def test_a_run_of_periods_requested_once_is_one_span() -> None:
    hour = 3_600_000
    spans = RequestedPeriods()
    for h in range(24 * 365):
        spans.record(h * hour, (h + 1) * hour, 1)
    assert spans.spans == [(0, 24 * 365 * hour, 1)]
    spans.record(10 * hour, 11 * hour, 2)  # a rerun splits it
    assert spans.spans == [
        (0, 10 * hour, 1),
        (10 * hour, 11 * hour, 2),
        (11 * hour, 8760 * hour, 1),
    ]
    assert spans.generation(10 * hour, 11 * hour) == 2
    assert spans.generation(9 * hour, 11 * hour) == 1
    assert spans.generation(8760 * hour, 8761 * hour) == 0


def test_an_empty_or_cleared_cursor_starts_afresh_and_another_rollups_too() -> None:
    assert SensorCursor.parse(None, "r").requested.spans == []
    assert SensorCursor.parse("", "r").requested.spans == []
    kept = SensorCursor("other", RequestedPeriods([(0, 10, 1)])).to_json()
    assert SensorCursor.parse(kept, "r").requested.spans == []
    assert SensorCursor.parse(kept, "other").requested.spans == [(0, 10, 1)]


@pytest.mark.parametrize("text", ["{", "[]", '{"v": 2, "rollup": "r", "requested": []}', '{"v": 1}'])
def test_a_cursor_this_sensor_did_not_write_is_refused_saying_how_to_start_afresh(
    text: str,
) -> None:
    with pytest.raises(ValueError, match="clear it in the UI"):
        SensorCursor.parse(text, "r")


def test_record_refuses_empty_periods_and_generation_zero() -> None:
    spans = RequestedPeriods()
    with pytest.raises(ValueError, match="empty or reversed"):
        spans.record(5, 5, 1)
    with pytest.raises(ValueError, match="generation must be 1 or more"):
        spans.record(0, 5, 0)
    with pytest.raises(ValueError, match="empty or reversed"):
        spans.generation(3, 2)
