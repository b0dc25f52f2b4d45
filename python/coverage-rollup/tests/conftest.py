from __future__ import annotations

import json
from typing import Any

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def coverage_answer(covered: bool, **overrides: Any) -> dict[str, Any]:
    """A coverage answer as the daemon sends it (field names of its OpenAPI document)."""
    answer: dict[str, Any] = {
        "asset": "warehouse.orders",
        "domain": "time",
        "start": "2025-06-14T00:00:00Z",
        "end": "2025-06-14T04:00:00Z",
        "covered": covered,
        "ratio": 1 if covered else 0.9375,
        "missing": [] if covered else [{"start": "2025-06-14T03:10:00Z", "end": "2025-06-14T03:25:00Z"}],
        "replay_required": [],
        "known_gaps": [],
        "batches": [
            {
                "start": "2025-06-14T00:00:00Z",
                "end": "2025-06-14T04:00:00Z",
                "state": "complete",
                "version": "v3",
            }
        ],
        "missing_count": 0 if covered else 1,
        "missing_total": 0 if covered else 900,
        "known_gaps_count": 0,
        "replay_required_count": 0,
        "truncated": False,
        "covered_until": "2025-06-14T04:00:00Z",
        "lag_seconds": 12.5,
        "last_event_at": "2025-06-14T04:00:07.125Z",
        "max_lag": None,
        "stale": None,
        "stale_reason": None,
    }
    answer.update(overrides)
    return answer


def body(value: Any) -> bytes:
    return json.dumps(value).encode()
