"""coverage-rollup for Apache Airflow 3: a ``coverage_rollup`` connection type, a hook, a
deferrable ``CoverageSensor`` and a ``CoverageAnnounceOperator``.

Registered with Airflow through the ``apache_airflow_provider`` entry point
(``get_provider_info.py``). The submodules import Airflow; this one does not.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("airflow-provider-coverage-rollup")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
