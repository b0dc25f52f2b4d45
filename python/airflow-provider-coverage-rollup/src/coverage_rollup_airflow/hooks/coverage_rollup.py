"""The one place the provider talks to coverage-rollup: a hook around its Python client."""

from __future__ import annotations

import copy
from typing import Any

from airflow.sdk import BaseHook
from coverage_rollup import ApiError, AsyncClient, Client, CoverageRollupError

from coverage_rollup_airflow._connection import DaemonSettings, daemon_settings
from coverage_rollup_airflow.get_provider_info import FORM


class CoverageRollupHook(BaseHook):
    """coverage-rollup through an Airflow connection of type ``coverage_rollup``.

    The connection's host is the daemon's URL (``http://coverage-rollup:8080``) and its password
    the bearer token (a read token for sensors when the daemon sets ``read_tokens``, a write token
    from ``api_tokens`` for the announce operator). Its extra may set ``timeout`` in seconds.

    ``get_conn()`` is a ``coverage_rollup.Client``; ``aget_client()`` an ``AsyncClient`` for
    triggers, read without blocking the triggerer's event loop.
    """

    conn_name_attr = "coverage_rollup_conn_id"
    default_conn_name = "coverage_rollup_default"
    conn_type = "coverage_rollup"
    hook_name = "coverage-rollup"

    def __init__(self, coverage_rollup_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.coverage_rollup_conn_id = coverage_rollup_conn_id
        self._client: Client | None = None

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """The connection form on Airflow 3.0 and 3.1 (3.2 and later read it from the provider
        info, see get_provider_info.py)."""
        return copy.deepcopy(FORM)

    def settings(self) -> DaemonSettings:
        conn = self.get_connection(self.coverage_rollup_conn_id)
        return daemon_settings(conn.conn_id, conn.host, conn.port, conn.password, conn.extra)

    async def asettings(self) -> DaemonSettings:
        getter = getattr(BaseHook, "aget_connection", None)
        if getter is not None:  # Airflow 3.1+: does not block the event loop
            conn = await getter(self.coverage_rollup_conn_id)
        else:
            from asgiref.sync import sync_to_async

            conn = await sync_to_async(self.get_connection)(self.coverage_rollup_conn_id)
        return daemon_settings(conn.conn_id, conn.host, conn.port, conn.password, conn.extra)

    def get_conn(self) -> Client:
        if self._client is None:
            s = self.settings()
            self._client = Client(s.url, s.token, timeout=s.timeout)
        return self._client

    async def aget_client(self, **options: Any) -> AsyncClient:
        """A new ``AsyncClient`` (``options`` as ``AsyncClient`` takes them); the caller closes
        it (``async with``)."""
        s = await self.asettings()
        return AsyncClient(s.url, s.token, timeout=s.timeout, **options)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def test_connection(self) -> tuple[bool, str]:
        """Asks the coverage of an asset no one names: a daemon that answers ``unknown_asset``
        is reachable, is coverage-rollup, and takes the token for reads."""
        try:
            self.get_conn().coverage("airflow.connection-test", 0, 1)
        except ApiError as error:
            if error.code == "unknown_asset":
                return True, "coverage-rollup answered"
            return False, str(error)
        except (CoverageRollupError, ValueError) as error:
            return False, str(error)
        finally:
            self.close()
        return True, "coverage-rollup answered"
