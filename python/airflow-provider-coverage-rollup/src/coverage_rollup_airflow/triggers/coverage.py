"""The trigger of a deferred ``CoverageSensor``: waits in the triggerer on coverage-rollup's
waiting coverage call, so it learns of coverage when the covering commit lands."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TaskSuccessEvent, TriggerEvent
from coverage_rollup import (
    ApiError,
    AsyncClient,
    BoundLike,
    Coverage,
    CoverageRollupError,
    Unreachable,
)

from coverage_rollup_airflow._connection import bound
from coverage_rollup_airflow._messages import covered, not_covered, nothing_seen
from coverage_rollup_airflow.hooks.coverage_rollup import CoverageRollupHook

#: Far enough that only the deferral's own timeout (the sensor's ``timeout``) ends the wait.
FOREVER = 10 * 365 * 86_400.0


class CoverageTrigger(BaseTrigger):
    """Fires once [start, end) of ``asset`` is covered: ``{"status": "covered", "asset", "start",
    "end", "ratio"}``, or ``{"status": "error", "message": ...}`` for an error that asking again
    cannot mend (a bad bound, a refused token). While it waits it logs what is missing, at the
    start and after each wait the daemon answered without coverage. The daemon being down or
    restarting is waited out.

    With ``end_from_trigger`` a covered window ends the task from the triggerer (Airflow's
    ``TaskSuccessEvent``) instead of resuming it on a worker, so the task is done as soon as the
    trigger learns of the coverage. It pushes no XCom: Airflow 3.3 stores a value pushed that way
    as JSON text (``json.dumps`` where the task SDK's own pushes keep it JSON), so downstream
    tasks would read a string."""

    def __init__(
        self,
        asset: str,
        start: str | int,
        end: str | int,
        coverage_rollup_conn_id: str = CoverageRollupHook.default_conn_name,
        limit: int = 20,
        wait_per_request: float = 50.0,
        end_from_trigger: bool = False,
    ) -> None:
        super().__init__()
        self.asset = asset
        self.start = start
        self.end = end
        self.coverage_rollup_conn_id = coverage_rollup_conn_id
        self.limit = limit
        self.wait_per_request = wait_per_request
        self.end_from_trigger = end_from_trigger

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "asset": self.asset,
                "start": self.start,
                "end": self.end,
                "coverage_rollup_conn_id": self.coverage_rollup_conn_id,
                "limit": self.limit,
                "wait_per_request": self.wait_per_request,
                "end_from_trigger": self.end_from_trigger,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        hook = CoverageRollupHook(self.coverage_rollup_conn_id)
        start, end = bound(self.start, "start"), bound(self.end, "end")
        try:
            client = await hook.aget_client(wait_per_request=self.wait_per_request)
        except ValueError as error:  # the connection names no daemon
            yield TriggerEvent({"status": "error", "message": str(error)})
            return
        async with client:
            try:
                answer = await self._first_look(client, start, end)
                if answer is None or not answer.covered:
                    answer = await client.wait_covered(
                        self.asset,
                        start,
                        end,
                        timeout=FOREVER,
                        limit=self.limit,
                        on_wait=self._log_missing,
                    )
            except ApiError as error:
                yield TriggerEvent({"status": "error", "message": str(error), "code": error.code})
                return
            except CoverageRollupError as error:
                yield TriggerEvent({"status": "error", "message": str(error)})
                return
        event = covered_event(answer)
        self.log.info("%s", covered(event["asset"], event["start"], event["end"], event["ratio"]))
        if self.end_from_trigger:
            yield TaskSuccessEvent()
        else:
            yield TriggerEvent(event)

    async def _first_look(self, client: AsyncClient, start: BoundLike, end: BoundLike) -> Coverage | None:
        """One answer without waiting, to log what is missing as the wait begins."""
        try:
            answer = await client.coverage(self.asset, start, end, limit=self.limit)
        except ApiError as error:
            if error.code != "unknown_asset" and error.status not in (429, 502, 503, 504):
                raise
            self.log.info("%s", nothing_seen(self.asset, start, end))
            return None
        except Unreachable as error:
            self.log.warning("coverage-rollup did not answer (%s); waiting for it", error)
            return None
        if not answer.covered:
            self._log_missing(answer)
        return answer

    def _log_missing(self, answer: Coverage) -> None:
        self.log.info("%s", not_covered(answer))


def return_value(event: dict[str, Any]) -> dict[str, Any]:
    """What the sensor returns (its XCom) for a covered window."""
    return {key: event[key] for key in ("asset", "start", "end", "ratio")}


def covered_event(answer: Coverage) -> dict[str, Any]:
    """The payload of a covered window (JSON, as trigger events must be)."""
    return {
        "status": "covered",
        "asset": answer.asset,
        "start": answer.raw["start"],
        "end": answer.raw["end"],
        "ratio": answer.ratio,
    }
