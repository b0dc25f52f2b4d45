from coverage_rollup_airflow.operators.announce import CoverageAnnounceOperator

__all__ = ["CoverageAnnounceOperator"]
