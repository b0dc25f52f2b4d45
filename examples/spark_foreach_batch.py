"""Spark Structured Streaming: announce each micro-batch's event-time slice to coverage-rollup.

Each micro-batch reports the [min, max) event time it wrote, with the batch id as the event id so
a retried batch is ingested once. Uses BullMQ's Python client from the driver (pip install bullmq).
"""
import asyncio

from bullmq import Queue
from pyspark.sql import DataFrame, functions as F

QUEUE = Queue("asset-events", {"connection": "redis://redis:6379"})


def announce(batch: DataFrame, batch_id: int) -> None:
    batch.write.mode("append").format("iceberg").save("warehouse.orders")
    bounds = batch.agg(F.min("event_time").alias("lo"), F.max("event_time").alias("hi")).first()
    if bounds is None or bounds.lo is None:
        return
    # The slice ends at the next minute boundary after the latest event this batch contained.
    end = bounds.hi.replace(second=0, microsecond=0)
    asyncio.run(
        QUEUE.add(
            "event",
            {
                "asset": "warehouse.orders",
                "start": bounds.lo.isoformat(),
                "end": end.isoformat(),
                "version": "v3",
                "id": f"orders-batch-{batch_id}",
            },
        )
    )


# stream.writeStream.foreachBatch(announce).option("checkpointLocation", "/chk/orders").start()
