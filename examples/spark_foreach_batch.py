"""Spark Structured Streaming: announce each micro-batch's event-time slice to coverage-rollup.

Each micro-batch reports the [min, max) event time it wrote, with the batch id as the event id so
a retried batch is ingested once. Uses BullMQ's Python client from the driver (pip install bullmq).
"""
import asyncio

from bullmq import Queue
from pyspark.sql import DataFrame, functions as F

ASSET = "warehouse.orders"
GROUPS = 1  # the daemon's queue.groups
PREFIX = "bull"  # the daemon's queue.prefix


def fnv1a32(text: str) -> int:
    """FNV-1a, 32 bits, over the UTF-8 bytes (the daemon's routing rule, README "Queue groups")."""
    h = 0x811C9DC5
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


# With queue.groups > 1 the asset's events go to its group's queue, under "{<prefix>-<group>}".
GROUP_PREFIX = PREFIX if GROUPS == 1 else "{%s-%d}" % (PREFIX, fnv1a32(ASSET) % GROUPS)
QUEUE = Queue("asset-events", {"connection": "redis://redis:6379", "prefix": GROUP_PREFIX})


def announce(batch: DataFrame, batch_id: int) -> None:
    batch.write.mode("append").format("iceberg").save(ASSET)
    bounds = batch.agg(F.min("event_time").alias("lo"), F.max("event_time").alias("hi")).first()
    if bounds is None or bounds.lo is None:
        return
    # The slice ends at the next minute boundary after the latest event this batch contained.
    end = bounds.hi.replace(second=0, microsecond=0)
    asyncio.run(
        QUEUE.add(
            "event",
            {
                "asset": ASSET,
                "start": bounds.lo.isoformat(),
                "end": end.isoformat(),
                "version": "v3",
                "id": f"orders-batch-{batch_id}",
            },
        )
    )


# stream.writeStream.foreachBatch(announce).option("checkpointLocation", "/chk/orders").start()
