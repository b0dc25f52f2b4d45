"""Dagster integration for coverage-rollup.

- ``CoverageRollupResource``: the daemon (url, token), giving ``coverage_rollup`` clients.
- ``build_coverage_rollup_sensor``: a run per covered period of a rollup, with the partition key
  of a ``TimeWindowPartitionsDefinition``; a partition with a hole runs once it is filled, a
  rerun runs again.
- ``build_coverage_check``: a partitioned asset check of a partition's coverage and missing ranges.
"""

from importlib.metadata import PackageNotFoundError, version

from .calendar import CalendarMismatchError, PartitionMatch, partition_for_period
from .check import build_coverage_check, coverage_result
from .cursor import RequestedPeriods, SensorCursor
from .plan import PartitionRequest, Plan, plan_requests, run_key
from .resource import CoverageRollupResource
from .rollups import Period, PeriodPage, RollupCalendar, Rollups
from .sensor import build_coverage_rollup_sensor

try:
    __version__ = version("dagster-coverage-rollup")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "CalendarMismatchError",
    "CoverageRollupResource",
    "PartitionMatch",
    "PartitionRequest",
    "Period",
    "PeriodPage",
    "Plan",
    "RequestedPeriods",
    "RollupCalendar",
    "Rollups",
    "SensorCursor",
    "__version__",
    "build_coverage_check",
    "build_coverage_rollup_sensor",
    "coverage_result",
    "partition_for_period",
    "plan_requests",
    "run_key",
]
