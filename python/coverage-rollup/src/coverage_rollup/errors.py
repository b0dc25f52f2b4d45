"""Errors: the API's own ``{code, message}`` answers, and a daemon that could not be reached."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class CoverageRollupError(Exception):
    """Anything this client raises about the daemon."""


class ApiError(CoverageRollupError):
    """An error answer of the API: ``code`` is stable and machine-readable (``unknown_asset``,
    ``invalid_bound``, ``end_before_start``, ``invalid_events``, ``too_many_waiters``, ...);
    ``message`` is for people. ``details`` holds the rest of the body (``errors`` of
    ``invalid_events``: one entry per refused event with its index and reason)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details: Mapping[str, Any] = details or {}
        #: Seconds the daemon asked to wait before asking again (``Retry-After``), if it said.
        self.retry_after = retry_after

    @classmethod
    def from_answer(cls, status: int, body: bytes, retry_after: str | None) -> ApiError:
        import json

        seconds = _seconds(retry_after)
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("code"), str):
            details = {k: v for k, v in parsed.items() if k not in ("code", "message")}
            return cls(status, parsed["code"], str(parsed.get("message", "")), details, seconds)
        text = body.decode("utf-8", "replace").strip()[:500]
        return cls(status, f"http_{status}", text or "no body", None, seconds)


class Unreachable(CoverageRollupError):
    """The request did not get an answer (connection refused, reset, timed out); the cause is
    the transport's own exception (``__cause__``)."""


def _seconds(header: str | None) -> float | None:
    if header is None:
        return None
    try:
        return max(0.0, float(header))
    except ValueError:
        return None  # an HTTP date: not sent by the daemon
