"""Publish asset events to coverage-rollup from Python with BullMQ for Python (3.x).

    pip install 'bullmq[postgres]==3.4.4'        # the extra only for the PostgreSQL backend
    python examples/python_producer.py --asset warehouse.orders --start 2025-06-01T10:00:00Z
    QUEUE_BACKEND=postgres DATABASE_URL=postgres://127.0.0.1:5432/coverage \\
        python examples/python_producer.py --asset warehouse.orders --start 2025-06-01T10:00:00Z

Each job's data is the canonical event (docs/events.md); a stable `id` per slice makes
a redelivery harmless. The queue settings must match the daemon's config; each option defaults to
the environment variable the daemon reads (QUEUE_BACKEND, REDIS_URL, DATABASE_URL) or to the
daemon's default (`asset-events`, prefix `bull`, 1 group):

- Redis (`queue.backend: redis`): the queue `asset-events` under the BullMQ prefix.
- PostgreSQL (`queue.backend: postgres`, the embedded default): BullMQ's PostgreSQL backend in the
  daemon's database, in the schema its prefix names (docs/operations.md "Which queue backend"). The embedded
  server's address is in the daemon's start log and in <data_dir>/server.json.
- `queue.groups: N` > 1: an asset's events go to the queue of group fnv1a32(asset) mod N, under the
  prefix "{<prefix>-<group>}" (docs/scaling.md "Queue groups and Redis Cluster").

It prints one JSON line: how many events went to which queue.
"""

import argparse
import asyncio
import json
import os
import re
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    env = os.environ.get
    parser.add_argument("--backend", choices=["redis", "postgres"],
                        default=env("QUEUE_BACKEND") or ("redis" if env("REDIS_URL") else "postgres"))
    parser.add_argument("--redis-url", default=env("REDIS_URL", "redis://127.0.0.1:6379"))
    parser.add_argument("--database-url", default=env("DATABASE_URL", "postgres://127.0.0.1:5432/coverage"))
    parser.add_argument("--queue", default=env("QUEUE_NAME", "asset-events"), help="queue.name")
    parser.add_argument("--prefix", default=env("QUEUE_PREFIX", "bull"), help="queue.prefix")
    parser.add_argument("--groups", type=int, default=int(env("QUEUE_GROUPS", "1")), help="queue.groups")
    parser.add_argument("--asset", action="append", required=True, help="repeat for several assets")
    parser.add_argument("--start", required=True, help="first slice start, ISO 8601 (UTC)")
    parser.add_argument("--slices", type=int, default=12, help="consecutive slices per asset")
    parser.add_argument("--minutes", type=int, default=5, help="width of one slice")
    parser.add_argument("--version", default="v1")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(produce(args))), flush=True)


if __name__ == "__main__":
    assert fnv1a32("warehouse.orders") == 0x77850E7F  # a test vector of docs/scaling.md
    main()
