from datetime import datetime, timedelta, timezone

import pytest

from coverage_rollup.bounds import format_bound, json_bound, parse_bound, parse_instant

UTC = timezone.utc


def test_aware_datetimes_are_sent_with_their_offset() -> None:
    berlin = timezone(timedelta(hours=2))
    assert format_bound(datetime(2025, 6, 1, 10, tzinfo=berlin), "start") == "2025-06-01T10:00:00+02:00"
    assert format_bound(datetime(2025, 6, 1, 10, 0, 0, 250000, tzinfo=UTC), "end") == (
        "2025-06-01T10:00:00.250000+00:00"
    )


def test_naive_datetimes_are_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="start is a naive datetime"):
        format_bound(datetime(2025, 6, 1), "start")


def test_strings_and_integers_pass_as_given() -> None:
    assert format_bound("2025-06-01T10:00:00", "start") == "2025-06-01T10:00:00"
    assert format_bound(42, "end") == "42"
    assert json_bound(42, "end") == 42
    assert json_bound("42", "end") == "42"


@pytest.mark.parametrize("bad", [True, None, 1.5, ""])
def test_other_values_are_refused(bad: object) -> None:
    with pytest.raises((TypeError, ValueError), match="start"):
        format_bound(bad, "start")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025-06-14T03:10:00Z", datetime(2025, 6, 14, 3, 10, tzinfo=UTC)),
        ("2025-06-14T03:10:00.5Z", datetime(2025, 6, 14, 3, 10, 0, 500000, tzinfo=UTC)),
        ("2025-06-14T03:10:00.00025Z", datetime(2025, 6, 14, 3, 10, 0, 250, tzinfo=UTC)),
        (
            "2025-06-01T00:00:00+02:00",
            datetime(2025, 5, 31, 22, tzinfo=UTC),
        ),
        ("2025-06-01T00:00:00-0530", datetime(2025, 6, 1, 5, 30, tzinfo=UTC)),
    ],
)
def test_instants_as_the_daemon_writes_them(text: str, expected: datetime) -> None:
    parsed = parse_instant(text)
    assert parsed == expected
    assert parsed.tzinfo is not None


def test_answer_bounds_by_domain() -> None:
    assert parse_bound(7, "integer") == 7
    assert parse_bound("2025-06-01T00:00:00Z", "time") == datetime(2025, 6, 1, tzinfo=UTC)
    with pytest.raises(ValueError, match="integer"):
        parse_bound("7", "integer")
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_instant("2025-06-01T00:00:00")
