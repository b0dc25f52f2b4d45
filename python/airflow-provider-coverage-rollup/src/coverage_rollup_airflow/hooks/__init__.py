from coverage_rollup_airflow.hooks.coverage_rollup import CoverageRollupHook

__all__ = ["CoverageRollupHook"]
