"""Publish asset events to coverage-rollup from Python with BullMQ for Python (3.x).

    python3 -m venv .venv && . .venv/bin/activate
    pip install 'bullmq[postgres]==3.4.4'        # the extra only for the PostgreSQL backend
    python3 examples/python_producer.py --asset warehouse.orders --start 2025-06-01T10:00:00Z

Run beside a daemon (in the directory it was started in, or with COVERAGE_ROLLUP_DATA_DIR set to
its data directory) it finds it through the record the daemon keeps there, daemon.json
(docs/operations.md, "The daemon's record"): its queue backend, queue name, prefix, groups and,
for the embedded default, its database. Anything the environment or the options say wins:
QUEUE_BACKEND, REDIS_URL, DATABASE_URL (an empty one is refused, never read as libpq's defaults),
QUEUE_NAME, QUEUE_PREFIX, QUEUE_GROUPS, or --backend, --redis-url, --database-url, ... With neither
a daemon nor a URL it says so and exits 2.

Each job's data is the canonical event of the daemon's events queue; a stable `id` per slice makes a
redelivery harmless. The queue settings must match the daemon's config:

- Redis (`queue.backend: redis`): the queue `asset-events` under the BullMQ prefix.
- PostgreSQL (`queue.backend: postgres`, the embedded default): BullMQ's PostgreSQL backend in the
  daemon's database, in the schema its prefix names.
- `queue.groups: N` > 1: an asset's events go to the queue of group fnv1a32(asset) mod N, under the
  prefix "{<prefix>-<group>}".

It prints one JSON line: how many events went to which queue.
"""

import argparse
import asyncio
import json
import os
import re
import sys
from datetime import datetime, timedelta, timezone

from bullmq import Queue


def fnv1a32(text: str) -> int:
    """FNV-1a, 32 bits, over the UTF-8 bytes of the asset name (the daemon's routing rule)."""
    h = 0x811C9DC5
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def group_prefix(prefix: str, groups: int, asset: str) -> str:
    """The BullMQ prefix of the queue group that carries `asset`."""
    if groups == 1:
        return prefix
    return "{%s-%d}" % (prefix, fnv1a32(asset.strip()) % groups)


def queue_schema(prefix: str) -> str:
    """The PostgreSQL schema a prefix names (the daemon's src/queue/schema.ts).

    A prefix that is a plain identifier is the schema itself; any other is spelled as one: each
    other character becomes `_`, then `_` and 8 hex digits of its fnv1a32 keep prefixes apart.
    """
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", prefix):
        return prefix
    spelled = re.sub(r"[^A-Za-z0-9_]", "_", prefix)
    if spelled[0].isdigit():
        spelled = "_" + spelled
    return "%s_%08x" % (spelled[:54], fnv1a32(prefix))


def queue_options(args: argparse.Namespace, prefix: str) -> dict:
    if args.backend == "postgres":
        # BullMQ's PostgreSQL backend takes no prefix: the schema is its namespace.
        return {"backend": "postgres", "connection": args.database_url, "schema": queue_schema(prefix)}
    return {"connection": args.redis_url, "prefix": prefix}


def parse_instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def iso(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")


async def produce(args: argparse.Namespace) -> dict:
    queues: dict[str, Queue] = {}  # one Queue per group in use
    sent: dict[str, int] = {}
    start = parse_instant(args.start)
    step = timedelta(minutes=args.minutes)
    try:
        for asset in args.asset:
            prefix = group_prefix(args.prefix, args.groups, asset)
            if prefix not in queues:
                queues[prefix] = Queue(args.queue, queue_options(args, prefix))
            for i in range(args.slices):
                s = start + i * step
                event = {
                    "asset": asset,
                    "start": iso(s),
                    "end": iso(s + step),
                    "version": args.version,
                    "id": f"{asset}@{s:%Y%m%dT%H%M%SZ}#{args.version}",
                    "produced_at": iso(datetime.now(timezone.utc)),
                    "extra": {"producer": "examples/python_producer.py"},
                }
                await queues[prefix].add("event", event)
                where = prefix if args.backend == "redis" else queue_schema(prefix)
                sent[where] = sent.get(where, 0) + 1
    finally:
        for queue in queues.values():
            await queue.close()
    return {"backend": args.backend, "queue": args.queue, "sent": sent}


def daemon_record() -> dict | None:
    """The record of the daemon running beside us (docs/operations.md), or None.

    It is <data dir>/daemon.json, the data directory being COVERAGE_ROLLUP_DATA_DIR or
    ./.coverage-rollup; a record whose pid is gone was left by a daemon that was killed.
    """
    path = os.path.join(os.environ.get("COVERAGE_ROLLUP_DATA_DIR") or ".coverage-rollup", "daemon.json")
    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
        os.kill(record["pid"], 0)
    except PermissionError:
        pass  # alive, another user's
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record


def refuse(why: str) -> None:
    print(f"python_producer.py: {why}", file=sys.stderr)
    sys.exit(2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    env = os.environ.get
    record = daemon_record() or {}
    queue = record.get("queue", {})
    backend = env("QUEUE_BACKEND") or ("redis" if env("REDIS_URL") else queue.get("backend", "postgres"))
    parser.add_argument("--backend", choices=["redis", "postgres"], default=backend)
    parser.add_argument("--redis-url", default=env("REDIS_URL", record.get("redis_url") or "redis://127.0.0.1:6379"))
    parser.add_argument("--database-url", default=env("DATABASE_URL", record.get("database_url")))
    parser.add_argument("--queue", default=env("QUEUE_NAME", queue.get("name", "asset-events")), help="queue.name")
    parser.add_argument("--prefix", default=env("QUEUE_PREFIX", queue.get("prefix", "bull")), help="queue.prefix")
    parser.add_argument("--groups", type=int, default=int(env("QUEUE_GROUPS", queue.get("groups", 1))),
                        help="queue.groups")
    parser.add_argument("--asset", action="append", required=True, help="repeat for several assets")
    parser.add_argument("--start", required=True, help="first slice start, ISO 8601 (UTC)")
    parser.add_argument("--slices", type=int, default=12, help="consecutive slices per asset")
    parser.add_argument("--minutes", type=int, default=5, help="width of one slice")
    parser.add_argument("--version", default="v1")
    args = parser.parse_args()
    if args.backend == "postgres" and not args.database_url:
        # psycopg reads an empty URL as libpq's defaults: the local server, the user's database.
        where = "DATABASE_URL is empty" if args.database_url == "" else "no daemon is recorded here"
        refuse(f"{where}: run it in the directory the daemon was started in (or set "
               "COVERAGE_ROLLUP_DATA_DIR to its data directory), or give the daemon's database as "
               "DATABASE_URL or --database-url")
    if args.backend == "redis" and not args.redis_url:
        refuse("REDIS_URL is empty: give the daemon's Redis URL, or unset it")
    print(json.dumps(asyncio.run(produce(args))), flush=True)


if __name__ == "__main__":
    assert fnv1a32("warehouse.orders") == 0x77850E7F  # the README's test vector
    main()
