"""A connection's fields to the daemon's URL, token and timeout; bounds as templates render them."""

from datetime import datetime, timedelta, timezone

import pytest

from coverage_rollup_airflow._connection import bound, daemon_settings


@pytest.mark.parametrize(
    ("host", "port", "url"),
    [
        ("http://coverage-rollup:8080", None, "http://coverage-rollup:8080"),
        ("https://cr.example.com/base/", None, "https://cr.example.com/base"),
        ("coverage-rollup", 8080, "http://coverage-rollup:8080"),
        ("coverage-rollup", None, "http://coverage-rollup"),
        ("http://coverage-rollup", 9000, "http://coverage-rollup:9000"),
        ("http://coverage-rollup:8080", 9000, "http://coverage-rollup:8080"),
    ],
)
def test_the_host_is_the_url(host: str, port: int | None, url: str) -> None:
    assert daemon_settings("c", host, port, None, None).url == url


def test_the_password_is_the_token_and_the_extra_the_timeout() -> None:
    s = daemon_settings("c", "http://h:1", None, "s3cret", '{"timeout": 5}')
    assert (s.token, s.timeout) == ("s3cret", 5.0)
    assert daemon_settings("c", "http://h:1", None, "", None).token is None
    assert daemon_settings("c", "http://h:1", None, None, {"timeout": 2.5}).timeout == 2.5


@pytest.mark.parametrize(
    ("host", "extra", "message"),
    [
        (None, None, "set the URL of coverage-rollup as its host"),
        ("  ", None, "set the URL"),
        ("http://h", "{not json", "not JSON"),
        ("http://h", "[1]", "JSON object"),
        ("http://h", '{"timeout": 0}', "timeout"),
        ("http://h", '{"timeout": "5"}', "timeout"),
    ],
)
def test_bad_connections_are_named(host: str | None, extra: str | None, message: str) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        daemon_settings("my_conn", host, None, None, extra)
    assert "'my_conn'" in str(raised.value)


UTC = timezone.utc


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2025-06-01T05:00:00+00:00", datetime(2025, 6, 1, 5, tzinfo=UTC)),
        ("2025-06-01 05:00:00+00:00", datetime(2025, 6, 1, 5, tzinfo=UTC)),
        ("2025-06-01T05:00:00Z", datetime(2025, 6, 1, 5, tzinfo=UTC)),
        ("2025-06-01T07:00:00+02:00", datetime(2025, 6, 1, 5, tzinfo=UTC)),
        ("2025-06-01T05:00:00", "2025-06-01T05:00:00"),  # the asset's zone applies
        ("1200", 1200),
        (" -5 ", -5),
        (42, 42),
        ("not a bound", "not a bound"),
    ],
)
def test_rendered_bounds(value: object, expected: object) -> None:
    assert bound(value, "start") == expected


def test_datetimes_pass_as_they_are() -> None:
    when = datetime(2025, 6, 1, tzinfo=timezone(timedelta(hours=2)))
    assert bound(when, "start") is when
    with pytest.raises(TypeError, match="start"):
        bound(True, "start")
