"""Announce events through the daemon's BullMQ queues, as its own producers do.

Needs BullMQ for Python: ``pip install 'coverage-rollup[bullmq]'`` for Redis,
``'coverage-rollup[bullmq-postgres]'`` for BullMQ's PostgreSQL backend (the embedded default's).

>>> async with Producer.from_env() as producer:
...     await producer.announce("warehouse.orders", "2025-06-01T10:00:00Z", "2025-06-01T10:05:00Z",
...                             version="v3", id="orders-batch-8812")

The queue settings must match the daemon's config (``queue.backend``, ``queue.name``,
``queue.prefix``, ``queue.groups``); each event goes to the queue of its asset's group, as the
daemon's ``emit`` and ``POST /v1/events`` route it (``coverage_rollup.routing``). Where the daemon
runs with the HTTP API only in reach, use ``Client.announce`` instead.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload
from urllib.parse import quote

from ._requests import EventLike, event_list
from .bounds import BoundLike
from .routing import group_of, group_prefix, queue_schema

if TYPE_CHECKING:
    from bullmq import Queue

Backend = Literal["redis", "postgres"]
#: The BullMQ job name the daemon's own producers use.
JOB_NAME = "event"


class Producer:
    """One BullMQ ``Queue`` per queue group in use, opened at the first event for that group.

    ``backend`` defaults as the daemon's does: ``redis`` when ``redis_url`` is given, else
    ``postgres``. ``job_options`` are BullMQ job options for every job (e.g.
    ``{"removeOnComplete": True}``).
    """

    def __init__(
        self,
        *,
        backend: Backend | None = None,
        redis_url: str | None = None,
        database_url: str | None = None,
        queue: str = "asset-events",
        prefix: str = "bull",
        groups: int = 1,
        job_options: Mapping[str, Any] | None = None,
    ) -> None:
        chosen = backend or ("redis" if redis_url else "postgres")
        if chosen not in ("redis", "postgres"):
            raise ValueError(f"backend must be redis or postgres, got {chosen!r}")
        url = redis_url if chosen == "redis" else database_url
        if not url or not url.strip():
            setting = "redis_url (REDIS_URL)" if chosen == "redis" else "database_url (DATABASE_URL)"
            raise ValueError(f"the {chosen} backend needs {setting}: an empty URL is refused")
        if ":" in queue or not queue.strip():
            raise ValueError(f"queue must be a BullMQ queue name without ':', got {queue!r}")
        group_of("x", groups)  # validates groups
        self.backend: Backend = chosen
        self.url = url
        self.queue = queue
        self.prefix = prefix
        self.groups = groups
        self.job_options = dict(job_options or {})
        self._queues: dict[int, Queue] = {}

    @classmethod
    def from_env(cls, **overrides: Any) -> Producer:
        """The daemon's own settings: ``QUEUE_BACKEND``, ``REDIS_URL``, ``DATABASE_URL``, and
        ``QUEUE_NAME``, ``QUEUE_PREFIX``, ``QUEUE_GROUPS`` for the queue's config (an empty one
        counts as unset, as the daemon reads them).

        What they leave unset comes from the daemon running beside us, found as the CLI finds it:
        its record, ``<data_dir>/daemon.json`` (``daemon_record``): its queue backend, name,
        prefix and groups and, with neither URL set, its database (or Redis) URL. With no daemon
        running, a stopped embedded default is found by the PostgreSQL address in
        ``<data_dir>/server.json``. The data directory is ``COVERAGE_ROLLUP_DATA_DIR``, else
        ``./.coverage-rollup``.
        """
        env = os.environ
        data_dir = env.get("COVERAGE_ROLLUP_DATA_DIR") or None
        record = daemon_record(data_dir) or {}
        recorded = record.get("queue") or {}
        redis_url = env.get("REDIS_URL") or None
        database_url = env.get("DATABASE_URL") or None
        backend = env.get("QUEUE_BACKEND") or None
        if redis_url is None and database_url is None:
            backend = backend or recorded.get("backend")
            if backend == "redis":
                redis_url = record.get("redis_url")
            else:
                database_url = record.get("database_url") or embedded_database_url(data_dir)
        settings: dict[str, Any] = {
            "backend": backend,
            "redis_url": redis_url,
            "database_url": database_url,
            "queue": env.get("QUEUE_NAME") or recorded.get("name") or "asset-events",
            "prefix": env.get("QUEUE_PREFIX") or recorded.get("prefix") or "bull",
            "groups": int(env.get("QUEUE_GROUPS") or recorded.get("groups") or 1),
        }
        settings.update(overrides)
        return cls(**settings)

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def location(self, asset: str) -> str:
        """Where ``asset``'s events wait: the group's BullMQ prefix on Redis, its schema on
        PostgreSQL."""
        prefix = group_prefix(self.prefix, self.groups, group_of(asset, self.groups))
        return prefix if self.backend == "redis" else queue_schema(prefix)

    @overload
    async def announce(
        self,
        asset: str,
        start: BoundLike,
        end: BoundLike,
        version: str | None = None,
        id: str | None = None,
        *,
        extra: Mapping[str, Any] | None = None,
    ) -> list[str]: ...

    @overload
    async def announce(self, asset: Sequence[EventLike]) -> list[str]: ...

    async def announce(
        self,
        asset: str | Sequence[EventLike],
        start: BoundLike | None = None,
        end: BoundLike | None = None,
        version: str | None = None,
        id: str | None = None,
        *,
        extra: Mapping[str, Any] | None = None,
    ) -> list[str]:
        """Adds one event, or each of a list, to its asset's queue group; answers the job ids in
        the order given. Events are not validated here: the daemon dead-letters an invalid one
        with its reason (``queue.dead_letter``)."""
        events = event_list(asset, start, end, version, id, extra)
        by_group: dict[int, list[int]] = {}
        for i, event in enumerate(events):
            name = event.get("asset")
            group = group_of(name, self.groups) if isinstance(name, str) else 0
            by_group.setdefault(group, []).append(i)
        ids: list[str] = [""] * len(events)
        for group, indexes in by_group.items():
            queue = self._queue(group)
            jobs = [{"name": JOB_NAME, "data": events[i], "opts": self.job_options} for i in indexes]
            added = await queue.addBulk(jobs)
            for i, job in zip(indexes, added, strict=True):
                ids[i] = str(job.id)
        return ids

    async def close(self) -> None:
        queues, self._queues = list(self._queues.values()), {}
        for queue in queues:
            await queue.close()

    def _queue(self, group: int) -> Queue:
        if group not in self._queues:
            try:
                from bullmq import Queue
            except ImportError as error:  # pragma: no cover - depends on the extra
                raise ImportError(
                    "the producer needs BullMQ for Python: pip install 'coverage-rollup[bullmq]' "
                    "(or [bullmq-postgres] for the PostgreSQL backend)"
                ) from error
            prefix = group_prefix(self.prefix, self.groups, group)
            self._queues[group] = Queue(self.queue, self._options(prefix))
        return self._queues[group]

    def _options(self, prefix: str) -> dict[str, Any]:
        if self.backend == "postgres":
            # BullMQ's PostgreSQL backend takes no prefix: the schema is its namespace.
            return {"backend": "postgres", "connection": self.url, "schema": queue_schema(prefix)}
        return {"connection": self.url, "prefix": prefix}


def daemon_record(data_dir: str | None = None) -> dict[str, Any] | None:
    """The record of the daemon running with data directory ``data_dir`` (default
    ``./.coverage-rollup``): ``daemon.json``, written by ``coverage-rollup start`` once it is ready
    and removed when it stops (its fields: docs/operations.md, "The daemon's record"). None when
    there is none, or when its ``pid`` is gone (a daemon killed with -9 leaves it behind)."""
    path = Path(data_dir or ".coverage-rollup") / "daemon.json"
    try:
        record = json.loads(path.read_text())
        pid = int(record["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(pid, 0)
    except PermissionError:
        pass  # alive, another user's process
    except OSError:
        return None
    return record if isinstance(record, dict) else None


def embedded_database_url(data_dir: str | None = None) -> str | None:
    """The embedded PostgreSQL of a daemon started in ``data_dir`` (default ``./.coverage-rollup``),
    from its ``server.json``; None when there is none."""
    path = Path(data_dir or ".coverage-rollup") / "server.json"
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    try:
        user = quote(str(record["user"]), safe="")
        password = quote(str(record["password"]), safe="")
        return f"postgres://{user}:{password}@127.0.0.1:{int(record['port'])}/{record['database']}"
    except (KeyError, TypeError, ValueError):
        return None
