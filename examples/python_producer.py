"""Publish asset events to coverage-rollup from Python with BullMQ's Python client.

    pip install bullmq
    python examples/python_producer.py

The job data is the canonical event of the README ("Events"); the queue name, prefix and number
of queue groups must match the daemon's config (defaults: asset-events, bull, 1 group). With
`queue.groups: N` > 1 an asset's events go to the queue of its group, under the prefix
"{<prefix>-<group>}" (README, "Queue groups and Redis Cluster").
"""
import asyncio
from datetime import datetime, timedelta, timezone

from bullmq import Queue

QUEUE_NAME = "asset-events"
PREFIX = "bull"
GROUPS = 1  # queue.groups


def fnv1a32(text: str) -> int:
    """FNV-1a, 32 bits, over the UTF-8 bytes of the asset name."""
    h = 0x811C9DC5
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def group_prefix(asset: str) -> str:
    """The BullMQ prefix of the queue group that carries `asset` (the daemon's routing rule)."""
    if GROUPS == 1:
        return PREFIX
    return "{%s-%d}" % (PREFIX, fnv1a32(asset.strip()) % GROUPS)


async def main() -> None:
    connection = "redis://127.0.0.1:6379"
    # One Queue per group in use. Redis Cluster was tested with the daemon's Node client only; where
    # a Python client cannot reach the Cluster, send through POST /v1/events or `emit` instead.
    queues: dict[str, Queue] = {}

    def queue_for(asset: str) -> Queue:
        prefix = group_prefix(asset)
        if prefix not in queues:
            queues[prefix] = Queue(QUEUE_NAME, {"connection": connection, "prefix": prefix})
        return queues[prefix]

    start = datetime(2025, 6, 1, 10, 0, tzinfo=timezone.utc)
    for i in range(12):
        s = start + timedelta(minutes=5 * i)
        e = s + timedelta(minutes=5)
        asset = "warehouse.orders"
        await queue_for(asset).add(
            "event",
            {
                "asset": asset,
                "start": s.isoformat(),
                "end": e.isoformat(),
                "version": "v1",
                # A stable id makes redelivery harmless: the daemon ingests each id once.
                "id": f"orders-{s:%Y%m%dT%H%M}",
                "produced_at": datetime.now(timezone.utc).isoformat(),
            },
        )
    for queue in queues.values():
        await queue.close()


if __name__ == "__main__":
    assert fnv1a32("warehouse.orders") == 0x77850E7F  # the README's test vector
    asyncio.run(main())
