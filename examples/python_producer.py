"""Publish asset events to coverage-rollup from Python, with the producer helper of the
coverage-rollup package (BullMQ for Python underneath).

    pip install './python/coverage-rollup[bullmq-postgres]'   # from a clone; [bullmq] for Redis only
    python examples/python_producer.py --asset warehouse.orders --start 2025-06-01T10:00:00Z
    QUEUE_BACKEND=postgres DATABASE_URL=postgres://127.0.0.1:5432/coverage \\
        python examples/python_producer.py --asset warehouse.orders --start 2025-06-01T10:00:00Z

Each slice is a canonical event with a stable `id` (docs/python.md), so a redelivery is harmless.
The queue settings must match the daemon's config; each option defaults to the environment
variable the daemon reads (QUEUE_BACKEND, REDIS_URL, DATABASE_URL) or to the daemon's default
(`asset-events`, prefix `bull`, 1 group). With no URL at all, the helper finds a daemon's embedded
PostgreSQL in ./.coverage-rollup (COVERAGE_ROLLUP_DATA_DIR), as the CLI does. The helper routes
each asset to its queue group (`queue.groups`) as the daemon does.

It prints one JSON line: how many events went to which queue (prefix on Redis, schema on
PostgreSQL).
"""

import argparse
import asyncio
import json
from collections import Counter
from datetime import datetime, timedelta, timezone

from coverage_rollup import Event
from coverage_rollup.producer import Producer


def parse_instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def iso(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%SZ")


def slices(args: argparse.Namespace) -> list[Event]:
    start = parse_instant(args.start)
    step = timedelta(minutes=args.minutes)
    events = []
    for asset in args.asset:
        for i in range(args.slices):
            s = start + i * step
            events.append(
                Event(
                    asset,
                    iso(s),
                    iso(s + step),
                    version=args.version,
                    id=f"{asset}@{s:%Y%m%dT%H%M%SZ}#{args.version}",
                    produced_at=datetime.now(timezone.utc),
                    extra={"producer": "examples/python_producer.py"},
                )
            )
    return events


async def produce(args: argparse.Namespace) -> dict:
    # Given options win; the rest come from the environment, as the daemon reads it.
    options = ("backend", "redis_url", "database_url", "queue", "prefix", "groups")
    settings = {key: getattr(args, key) for key in options if getattr(args, key) is not None}
    events = slices(args)
    async with Producer.from_env(**settings) as producer:
        await producer.announce(events)
        sent = Counter(producer.location(e.asset) for e in events)
        return {"backend": producer.backend, "queue": producer.queue, "sent": dict(sent)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=["redis", "postgres"], help="queue.backend (QUEUE_BACKEND)")
    parser.add_argument("--redis-url", help="REDIS_URL")
    parser.add_argument("--database-url", help="DATABASE_URL")
    parser.add_argument("--queue", help="queue.name (QUEUE_NAME, default asset-events)")
    parser.add_argument("--prefix", help="queue.prefix (QUEUE_PREFIX, default bull)")
    parser.add_argument("--groups", type=int, help="queue.groups (QUEUE_GROUPS, default 1)")
    parser.add_argument("--asset", action="append", required=True, help="repeat for several assets")
    parser.add_argument("--start", required=True, help="first slice start, ISO 8601 (UTC)")
    parser.add_argument("--slices", type=int, default=12, help="consecutive slices per asset")
    parser.add_argument("--minutes", type=int, default=5, help="width of one slice")
    parser.add_argument("--version", default="v1")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(produce(args))), flush=True)


if __name__ == "__main__":
    main()
