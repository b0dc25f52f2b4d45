"""``CoverageRollupResource``: the coverage-rollup daemon as a Dagster resource."""

from __future__ import annotations

from coverage_rollup import AsyncClient, Client
from dagster import ConfigurableResource
from pydantic import Field

from .rollups import Rollups


def _user_agent() -> str:
    from . import __version__

    return f"dagster-coverage-rollup/{__version__}"


class CoverageRollupResource(ConfigurableResource):  # type: ignore[type-arg]
    """Where the daemon is and how to authenticate to it; gives ``coverage_rollup`` clients.

    ```python
    CoverageRollupResource(
        url=dg.EnvVar("COVERAGE_ROLLUP_URL"), token=dg.EnvVar("COVERAGE_ROLLUP_TOKEN")
    )
    ```
    """

    url: str = Field(description="The daemon's base URL, e.g. http://coverage-rollup:8080")
    token: str | None = Field(
        default=None,
        description=(
            "A bearer token: a read token when the daemon sets read_tokens, a write token from "
            "api_tokens to announce. Pass it as dg.EnvVar so Dagster never shows its value."
        ),
    )
    timeout: float = Field(default=30.0, description="Seconds before a request gives up")

    def get_client(self) -> Client:
        """A ``coverage_rollup.Client`` (use it as a context manager, or close it)."""
        return Client(self.url, self.token, timeout=self.timeout)

    def get_async_client(self) -> AsyncClient:
        """A ``coverage_rollup.AsyncClient`` (``async with``, or ``await client.aclose()``)."""
        return AsyncClient(self.url, self.token, timeout=self.timeout)

    def get_rollups(self) -> Rollups:
        """The rollup and period listings the sensor reads."""
        return Rollups(self.url, self.token, timeout=self.timeout, user_agent=_user_agent())
