"""``CoverageSensor``: waits until [start, end) of an asset is covered, deferred by default."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from coverage_rollup import ApiError, Coverage, Unreachable

from coverage_rollup_airflow._connection import bound
from coverage_rollup_airflow._messages import covered, not_covered, nothing_seen
from coverage_rollup_airflow.hooks.coverage_rollup import CoverageRollupHook
from coverage_rollup_airflow.triggers.coverage import CoverageTrigger, return_value

if TYPE_CHECKING:
    from airflow.sdk import Context


class CoverageSensor(BaseSensorOperator):
    """Waits until [start, end) of ``asset`` is covered in coverage-rollup.

    ``start`` and ``end`` are templated (``"{{ data_interval_start }}"``), and may be datetimes
    or integers (integer assets). Deferrable by default: the task gives its worker slot back and a
    ``CoverageTrigger`` waits in the triggerer on the daemon's waiting coverage call, then ends the
    task from the triggerer (success) within moments of the commit that covers the window; with
    ``deferrable=False`` it pokes in ``mode="reschedule"`` every ``poke_interval``. Either way it
    logs the ranges still missing while it waits.

    Its return value (XCom) is ``{"asset", "start", "end", "ratio"}``, except when the trigger ends
    the task: Airflow 3.3 stores a value pushed from the triggerer as JSON text, which downstream
    tasks would read as a string, so none is pushed then. ``end_from_trigger=False`` resumes the
    task on a worker after the trigger fires instead (a worker's start later), to return it.

    :param asset: the asset's name as the daemon knows it
    :param start: the window's start (inclusive)
    :param end: the window's end (exclusive)
    :param coverage_rollup_conn_id: a connection of type ``coverage_rollup``
    :param deferrable: wait in the triggerer (default) instead of rescheduling pokes
    :param end_from_trigger: a deferred sensor ends in the triggerer (default), not on a worker
    :param limit: most missing ranges each answer lists (the counts are exact anyway)
    """

    template_fields: Sequence[str] = ("asset", "start", "end")
    ui_color = "#d8f0e4"

    def __init__(
        self,
        *,
        asset: str,
        start: Any,
        end: Any,
        coverage_rollup_conn_id: str = CoverageRollupHook.default_conn_name,
        deferrable: bool = True,
        end_from_trigger: bool = True,
        limit: int = 20,
        **kwargs: Any,
    ) -> None:
        if not deferrable:
            kwargs.setdefault("mode", "reschedule")
        super().__init__(**kwargs)
        self.asset = asset
        self.start = start
        self.end = end
        self.coverage_rollup_conn_id = coverage_rollup_conn_id
        self.deferrable = deferrable
        self.end_from_trigger = end_from_trigger
        self.limit = limit

    def poke(self, context: Context) -> PokeReturnValue:
        start, end = bound(self.start, "start"), bound(self.end, "end")
        hook = CoverageRollupHook(self.coverage_rollup_conn_id)
        try:
            answer = hook.get_conn().coverage(self.asset, start, end, limit=self.limit)
        except ApiError as error:
            if error.code != "unknown_asset":
                raise
            self.log.info("%s", nothing_seen(self.asset, start, end))
            return PokeReturnValue(is_done=False)
        except Unreachable as error:  # asked again at the next poke
            self.log.warning("coverage-rollup did not answer (%s); asking again", error)
            return PokeReturnValue(is_done=False)
        finally:
            hook.close()
        if not answer.covered:
            self.log.info("%s", not_covered(answer))
            return PokeReturnValue(is_done=False)
        return PokeReturnValue(is_done=True, xcom_value=self._covered(answer))

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        # One look first: a window already covered needs no trip through the triggerer.
        done = self.poke(context)
        if done.is_done:
            return done.xcom_value
        self.defer(
            trigger=CoverageTrigger(
                asset=self.asset,
                start=_serializable(self.start),
                end=_serializable(self.end),
                coverage_rollup_conn_id=self.coverage_rollup_conn_id,
                limit=self.limit,
                end_from_trigger=self.end_from_trigger,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Resumed by the trigger: its error, or a covered window unless the trigger ends the task."""
        if event.get("status") != "covered":
            raise RuntimeError(f"coverage-rollup: {event.get('message', event)}")
        self.log.info("%s", covered(event["asset"], event["start"], event["end"], event["ratio"]))
        return return_value(event)

    def _covered(self, answer: Coverage) -> dict[str, Any]:
        raw = answer.raw
        self.log.info("%s", covered(answer.asset, raw["start"], raw["end"], answer.ratio))
        return {
            "asset": answer.asset,
            "start": raw["start"],
            "end": raw["end"],
            "ratio": answer.ratio,
        }


def _serializable(value: Any) -> str | int:
    """A bound the trigger can be serialized with: integers as they are, the rest as text."""
    b = bound(value, "bound")
    return b if isinstance(b, (int, str)) else b.isoformat()
