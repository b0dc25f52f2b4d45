"""The producer helper without a queue: settings, routing and the jobs it would add."""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path
from typing import Any, ClassVar

import pytest

from coverage_rollup import Event
from coverage_rollup.producer import Producer, daemon_record, embedded_database_url


class FakeQueue:
    """Records what BullMQ's Queue is given; job ids count up per queue."""

    opened: ClassVar[list[FakeQueue]] = []

    def __init__(self, name: str, opts: dict[str, Any]) -> None:
        self.name = name
        self.opts = opts
        self.jobs: list[dict[str, Any]] = []
        self.closed = False
        FakeQueue.opened.append(self)

    async def addBulk(self, jobs: list[dict[str, Any]]) -> list[Any]:
        start = len(self.jobs)
        self.jobs.extend(jobs)
        return [types.SimpleNamespace(id=f"{self.opts.get('prefix')}#{start + i}") for i in range(len(jobs))]

    async def close(self) -> None:
        self.closed = True


@pytest.fixture
def fake_bullmq(monkeypatch: pytest.MonkeyPatch) -> type[FakeQueue]:
    FakeQueue.opened = []
    module = types.ModuleType("bullmq")
    module.Queue = FakeQueue  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "bullmq", module)
    return FakeQueue


@pytest.mark.anyio
async def test_each_event_goes_to_its_asset_s_group(fake_bullmq: type[FakeQueue]) -> None:
    async with Producer(redis_url="redis://127.0.0.1:6379", prefix="cr", groups=3) as producer:
        ids = await producer.announce(
            [
                Event("py.orders", "2025-06-01T10:00:00Z", "2025-06-01T10:05:00Z", "v1", "o1"),
                Event("py.payments", "2025-06-01T10:00:00Z", "2025-06-01T10:05:00Z", "v1", "p1"),
                Event("py.orders", "2025-06-01T10:05:00Z", "2025-06-01T10:10:00Z", "v1", "o2"),
            ]
        )
        one = await producer.announce("py.orders", 1, 2)
        assert producer.location("py.orders") == "{cr-2}"
        assert producer.location("py.payments") == "{cr-0}"
    # group_of: py.orders -> 2, py.payments -> 0 (the daemon's vectors, test_routing.py)
    assert ids == ["{cr-2}#0", "{cr-0}#0", "{cr-2}#1"]
    assert one == ["{cr-2}#2"]
    by_prefix = {q.opts["prefix"]: q for q in fake_bullmq.opened}
    assert set(by_prefix) == {"{cr-2}", "{cr-0}"}
    orders = by_prefix["{cr-2}"]
    assert orders.name == "asset-events"
    assert orders.opts["connection"] == "redis://127.0.0.1:6379"
    assert [j["data"]["id"] for j in orders.jobs[:2]] == ["o1", "o2"]
    assert all(j["name"] == "event" for j in orders.jobs)
    assert orders.jobs[2]["data"] == {"asset": "py.orders", "start": 1, "end": 2}
    assert all(q.closed for q in fake_bullmq.opened)


@pytest.mark.anyio
async def test_the_postgres_backend_names_schemas(fake_bullmq: type[FakeQueue]) -> None:
    producer = Producer(backend="postgres", database_url="postgres://u@h/db", groups=3)
    await producer.announce("py.orders", 1, 2)
    await producer.close()
    (queue,) = fake_bullmq.opened
    assert queue.opts == {
        "backend": "postgres",
        "connection": "postgres://u@h/db",
        "schema": "_bull_2__" + queue.opts["schema"].rsplit("__", 1)[1],
    }
    assert producer.location("py.orders") == queue.opts["schema"]


def test_the_backend_defaults_as_the_daemon_s() -> None:
    assert Producer(redis_url="redis://r").backend == "redis"
    assert Producer(database_url="postgres://p").backend == "postgres"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"backend": "redis", "redis_url": ""}, "REDIS_URL"),
        ({}, "DATABASE_URL"),
        ({"database_url": "postgres://p", "queue": "a:b"}, "queue"),
        ({"database_url": "postgres://p", "groups": 0}, "groups"),
        ({"backend": "kafka", "database_url": "postgres://p"}, "backend"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Producer(**kwargs)


def test_from_env_reads_the_daemon_s_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://r:6379")
    monkeypatch.setenv("QUEUE_GROUPS", "4")
    monkeypatch.setenv("QUEUE_PREFIX", "cr")
    monkeypatch.delenv("QUEUE_BACKEND", raising=False)
    producer = Producer.from_env()
    assert (producer.backend, producer.url, producer.groups, producer.prefix) == (
        "redis",
        "redis://r:6379",
        4,
        "cr",
    )


def test_from_env_finds_the_embedded_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("REDIS_URL", "DATABASE_URL", "QUEUE_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    record = {
        "port": 54329,
        "user": "postgres",
        "password": "p@ss/w",
        "database": "coverage_rollup",
    }
    (tmp_path / "server.json").write_text(json.dumps(record))
    monkeypatch.setenv("COVERAGE_ROLLUP_DATA_DIR", str(tmp_path))
    producer = Producer.from_env()
    assert producer.backend == "postgres"
    assert producer.url == "postgres://postgres:p%40ss%2Fw@127.0.0.1:54329/coverage_rollup"
    assert embedded_database_url(str(tmp_path / "absent")) is None


def _record(tmp_path: Path, pid: int, **fields: Any) -> None:
    record = {
        "format": 1,
        "pid": pid,
        "url": "http://127.0.0.1:8080",
        "database_url": "postgres://coverage_rollup:pw@127.0.0.1:15433/coverage_rollup",
        "redis_url": None,
        "queue": {"backend": "postgres", "name": "events-q", "prefix": "cr", "groups": 3},
        **fields,
    }
    (tmp_path / "daemon.json").write_text(json.dumps(record))


def test_from_env_finds_the_daemon_beside_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("REDIS_URL", "DATABASE_URL", "QUEUE_BACKEND", "QUEUE_NAME", "QUEUE_PREFIX", "QUEUE_GROUPS"):
        monkeypatch.delenv(name, raising=False)
    _record(tmp_path, os.getpid())
    monkeypatch.setenv("COVERAGE_ROLLUP_DATA_DIR", str(tmp_path))
    producer = Producer.from_env()
    assert (producer.backend, producer.url, producer.queue, producer.prefix, producer.groups) == (
        "postgres",
        "postgres://coverage_rollup:pw@127.0.0.1:15433/coverage_rollup",
        "events-q",
        "cr",
        3,
    )
    # The environment wins over the record; an empty variable counts as unset.
    monkeypatch.setenv("QUEUE_PREFIX", "mine")
    monkeypatch.setenv("DATABASE_URL", "")
    assert (Producer.from_env().prefix, Producer.from_env().url) == ("mine", producer.url)
    monkeypatch.setenv("DATABASE_URL", "postgres://elsewhere/db")
    assert Producer.from_env().url == "postgres://elsewhere/db"


def test_a_record_whose_daemon_is_gone_is_ignored(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("REDIS_URL", "DATABASE_URL", "QUEUE_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    _record(tmp_path, 2**22 + 12_345)  # above Linux's pid_max: no such process
    monkeypatch.setenv("COVERAGE_ROLLUP_DATA_DIR", str(tmp_path))
    assert daemon_record(str(tmp_path)) is None
    # Nothing else to go on: refused, never libpq's defaults (the local server, the user's database).
    with pytest.raises(ValueError, match="an empty URL is refused"):
        Producer.from_env()
