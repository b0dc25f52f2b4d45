"""coverage-rollup for Python: a typed client (sync and async) and a producer helper.

>>> from coverage_rollup import Client
>>> with Client("http://127.0.0.1:8080", token="...") as client:
...     answer = client.coverage("warehouse.orders", "2025-06-01T00:00:00Z", "2025-06-02T00:00:00Z")
...     answer.covered, answer.missing

The producer helper (``coverage_rollup.producer``) needs the ``bullmq`` extra:
``pip install 'coverage-rollup[bullmq]'`` (``[bullmq-postgres]`` for BullMQ's PostgreSQL backend).
"""

from importlib.metadata import PackageNotFoundError, version

from .async_client import AsyncClient
from .bounds import Bound, BoundLike
from .client import Client
from .errors import ApiError, CoverageRollupError, Unreachable
from .models import Announced, Batch, Coverage, Event, IngestResult, Range, ReplayRequired
from .routing import fnv1a32, group_of

try:
    __version__ = version("coverage-rollup")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "Announced",
    "ApiError",
    "AsyncClient",
    "Batch",
    "Bound",
    "BoundLike",
    "Client",
    "Coverage",
    "CoverageRollupError",
    "Event",
    "IngestResult",
    "Range",
    "ReplayRequired",
    "Unreachable",
    "__version__",
    "fnv1a32",
    "group_of",
]
