"""``CoverageAnnounceOperator``: tells coverage-rollup a task wrote [start, end) of an asset."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from coverage_rollup_airflow._connection import bound
from coverage_rollup_airflow.hooks.coverage_rollup import CoverageRollupHook

if TYPE_CHECKING:
    from airflow.sdk import Context


class CoverageAnnounceOperator(BaseOperator):
    """Announces one completion over ``POST /v1/events``: [start, end) of ``asset`` is complete,
    at ``version`` if given. Put it after the task that writes the data.

    ``asset``, ``start``, ``end``, ``version``, ``event_id`` and ``extra`` are templated
    (``start="{{ data_interval_start }}"``). The connection needs a write token (``api_tokens``).
    Without ``event_id`` the daemon deduplicates by content, so a retry that announces the same
    range and version again changes nothing, while a rerun at a new version is a new completion.
    Its return value (XCom) is ``{"accepted", "committed"}``; ``committed`` is true where the
    daemon's queue is in PostgreSQL (the event is in the index when the task ends).

    :param extra: free-form JSON kept with the event (``extra`` of the event)
    """

    template_fields: Sequence[str] = ("asset", "start", "end", "version", "event_id", "extra")
    ui_color = "#cfe8d8"

    def __init__(
        self,
        *,
        asset: str,
        start: Any,
        end: Any,
        version: str | None = None,
        event_id: str | None = None,
        extra: Mapping[str, Any] | None = None,
        coverage_rollup_conn_id: str = CoverageRollupHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.asset = asset
        self.start = start
        self.end = end
        self.version = version
        self.event_id = event_id
        self.extra = extra
        self.coverage_rollup_conn_id = coverage_rollup_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        start, end = bound(self.start, "start"), bound(self.end, "end")
        hook = CoverageRollupHook(self.coverage_rollup_conn_id)
        try:
            announced = hook.get_conn().announce(
                self.asset,
                start,
                end,
                self.version or None,
                self.event_id or None,
                extra=self.extra or None,
            )
        finally:
            hook.close()
        self.log.info(
            "announced %s [%s, %s)%s: %s",
            self.asset,
            start,
            end,
            f" at {self.version}" if self.version else "",
            "committed to the index" if announced.committed else "enqueued",
        )
        return {"accepted": announced.accepted, "committed": announced.committed}
