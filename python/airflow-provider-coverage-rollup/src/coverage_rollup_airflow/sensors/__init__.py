from coverage_rollup_airflow.sensors.coverage import CoverageSensor

__all__ = ["CoverageSensor"]
