"""The log lines of the sensor and its trigger (no Airflow import: tested on their own)."""

from __future__ import annotations

from typing import Any

from coverage_rollup import Coverage

#: Ranges named in one line; the counts say how many more there are.
MOST_RANGES = 10


def not_covered(answer: Coverage) -> str:
    """``asset [start, end) not covered: ratio 0.5, missing 1 range(s): [a, b)``, bounds as the
    daemon wrote them, then the ranges that must be replayed, if any."""
    raw = answer.raw
    line = (
        f"{answer.asset} [{raw['start']}, {raw['end']}) not covered: ratio {answer.ratio:g}, "
        f"missing {answer.missing_count} range(s)"
    )
    if answer.missing_count:
        line += ": " + _ranges(raw.get("missing", []), answer.missing_count)
    if answer.replay_required_count:
        line += f"; replay required for {answer.replay_required_count} range(s): " + _ranges(
            raw.get("replay_required", []), answer.replay_required_count
        )
    return line


def nothing_seen(asset: str, start: object, end: object) -> str:
    return f"{asset} [{_show(start)}, {_show(end)}) not covered: nothing seen yet"


def covered(asset: str, start: object, end: object, ratio: float) -> str:
    return f"{asset} [{_show(start)}, {_show(end)}) covered (ratio {ratio:g})"


def _ranges(items: list[dict[str, Any]], total: int) -> str:
    shown = items[:MOST_RANGES]
    parts = []
    for r in shown:
        part = f"[{r['start']}, {r['end']})"
        if "required_version" in r:
            part += f" at {r['required_version']}"
        parts.append(part)
    more = total - len(shown)
    return ", ".join(parts) + (f" and {more} more" if more > 0 else "")


def _show(value: object) -> str:
    iso = getattr(value, "isoformat", None)
    return str(iso()) if callable(iso) else str(value)
