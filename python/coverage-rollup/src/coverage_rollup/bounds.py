"""Interval bounds in and out: timezone-aware datetimes for time assets, integers for integer ones.

The daemon reads a timestamp without an offset in the asset's configured zone, so a string is sent
exactly as given; a naive ``datetime`` is refused instead, because Python code that builds one
almost always meant UTC or local time and would silently get the asset's zone.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

#: A bound as the client returns it: an aware datetime (time assets) or an int (integer assets).
Bound = datetime | int
#: A bound as the client accepts it: those, or a string in any form the daemon parses.
BoundLike = datetime | int | str

_ISO_INSTANT = re.compile(
    r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:?\d{2})$",
)


def format_bound(value: BoundLike, field: str) -> str:
    """The query-string or JSON-string form of a bound; raises ValueError naming ``field``."""
    if isinstance(value, bool):  # bool is an int subclass: never a bound
        raise TypeError(f"{field} must be a datetime, an int or a string, got a bool")
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(
                f"{field} is a naive datetime; give it a time zone (e.g. tzinfo=timezone.utc) "
                "or pass a string to have the asset's configured zone apply"
            )
        return value.isoformat()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        if not value.strip():
            raise ValueError(f"{field} must not be empty")
        return value
    raise TypeError(f"{field} must be a datetime, an int or a string, got {type(value).__name__}")


def json_bound(value: BoundLike, field: str) -> str | int:
    """A bound for a JSON body: integers stay JSON numbers, the rest are strings."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return format_bound(value, field)


def parse_instant(text: str) -> datetime:
    """An ISO 8601 instant as the daemon writes it (``2025-06-01T10:05:00.25Z``), timezone-aware.

    ``datetime.fromisoformat`` reads neither ``Z`` nor 1, 2, 4 or 5 fractional digits before
    Python 3.11, so the fraction is normalised to microseconds here.
    """
    m = _ISO_INSTANT.match(text.strip())
    if not m:
        raise ValueError(f"not an ISO 8601 instant with an offset: {text!r}")
    base, fraction, offset = m.groups()
    micros = int((fraction or "").ljust(6, "0")[:6] or "0")
    if offset == "Z":
        tz = timezone.utc
    else:
        sign = -1 if offset[0] == "-" else 1
        digits = offset[1:].replace(":", "")
        tz = timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
    return datetime.fromisoformat(base).replace(microsecond=micros, tzinfo=tz)


def parse_bound(value: object, domain: str) -> Bound:
    """A bound of an answer: an int for integer assets, an aware datetime for time assets."""
    if domain == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer bound, got {value!r}")
        return value
    if not isinstance(value, str):
        raise ValueError(f"expected an ISO 8601 bound, got {value!r}")
    return parse_instant(value)
