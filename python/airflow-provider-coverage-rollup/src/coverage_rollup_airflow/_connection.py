"""How a ``coverage_rollup`` connection names the daemon (no Airflow import: tested on its own)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from coverage_rollup import BoundLike

DEFAULT_TIMEOUT = 30.0


@dataclass(frozen=True)
class DaemonSettings:
    url: str
    token: str | None
    timeout: float


def daemon_settings(
    conn_id: str,
    host: str | None,
    port: int | None,
    password: str | None,
    extra: str | Mapping[str, Any] | None,
) -> DaemonSettings:
    """The daemon's URL, token and timeout from a connection's fields.

    ``host`` is the URL (``http://coverage-rollup:8080``), or a host name the port (if any) and
    ``http://`` are added to; ``password`` is the bearer token; the extra may set ``timeout``
    (seconds).
    """
    if not host or not host.strip():
        raise ValueError(
            f"connection {conn_id!r}: set the URL of coverage-rollup as its host, "
            "e.g. http://coverage-rollup:8080"
        )
    url = host.strip().rstrip("/")
    if "://" not in url:
        url = f"http://{url}" + (f":{port}" if port else "")
    elif port and url.count(":") == 1:  # a URL without its own port
        url = f"{url}:{port}"
    options = _extra(conn_id, extra)
    timeout = options.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ValueError(f"connection {conn_id!r}: extra timeout must be a positive number of seconds")
    return DaemonSettings(url=url, token=password or None, timeout=float(timeout))


def _extra(conn_id: str, extra: str | Mapping[str, Any] | None) -> Mapping[str, Any]:
    if not extra:
        return {}
    if isinstance(extra, Mapping):
        return extra
    try:
        parsed = json.loads(extra)
    except ValueError as error:
        raise ValueError(f"connection {conn_id!r}: its extra is not JSON") from error
    if not isinstance(parsed, dict):
        raise ValueError(f"connection {conn_id!r}: its extra must be a JSON object")
    return parsed


def bound(value: Any, field: str) -> BoundLike:
    """A sensor's or operator's bound as rendered: datetimes and integers as they are; a string
    that reads as an aware timestamp (``{{ data_interval_start }}`` renders
    ``2025-06-01 05:00:00+00:00`` or with a ``T``) as that instant; any other string as given
    (an integer bound, or a timestamp the daemon reads in the asset's zone)."""
    if isinstance(value, (datetime, int)) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"-?[0-9]+", text):
            return int(text)
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return text
        return parsed if parsed.tzinfo is not None else text
    raise TypeError(f"{field} must be a datetime, an integer or a string, got {type(value).__name__}")
