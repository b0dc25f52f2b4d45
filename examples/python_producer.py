"""Publish asset events to coverage-rollup from Python with BullMQ's Python client.

    pip install bullmq
    python examples/python_producer.py

The job data is the canonical event of the README ("Events"); the queue name and prefix must match
the daemon's config (defaults: asset-events, bull).
"""
import asyncio
from datetime import datetime, timedelta, timezone

from bullmq import Queue


async def main() -> None:
    queue = Queue("asset-events", {"connection": "redis://127.0.0.1:6379", "prefix": "bull"})
    start = datetime(2025, 6, 1, 10, 0, tzinfo=timezone.utc)
    for i in range(12):
        s = start + timedelta(minutes=5 * i)
        e = s + timedelta(minutes=5)
        await queue.add(
            "event",
            {
                "asset": "warehouse.orders",
                "start": s.isoformat(),
                "end": e.isoformat(),
                "version": "v1",
                # A stable id makes redelivery harmless: the daemon ingests each id once.
                "id": f"orders-{s:%Y%m%dT%H%M}",
                "produced_at": datetime.now(timezone.utc).isoformat(),
            },
        )
    await queue.close()


if __name__ == "__main__":
    asyncio.run(main())
