from coverage_rollup_airflow.triggers.coverage import CoverageTrigger

__all__ = ["CoverageTrigger"]
