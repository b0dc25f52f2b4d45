"""Spark Structured Streaming: announce to coverage-rollup what each micro-batch made complete.

    pip install pyspark==4.1.1 './python/coverage-rollup[bullmq-postgres]'   # Java 17 or 21 on the PATH
    python examples/spark_foreach_batch.py --input /data/orders-in --output /data/orders \\
        --checkpoint /chk/orders --asset warehouse.orders --delay '5 minutes'

The job reads JSON rows `{"event_time": ..., "order_id": ...}` from a file source, writes every row
to a file sink with foreachBatch (a stateless query: Spark drops no late row) and tells
coverage-rollup, over its BullMQ queue (Redis or PostgreSQL), which event-time range is complete. What Spark's own code
says about it:

- foreachBatch gets only (DataFrame, batch id): no watermark. The watermark is in the query's
  progress, `progress.eventTime["watermark"]`, and it is the watermark the batch *used*, computed
  from the rows of the batches before it (ProgressReporter: batchWatermarkMs); the watermark the
  rows of batch N advance appears in the progress of batch N + 1. A stateless query runs no batch
  without new data, so the last batch's advance is announced with the next batch.
- So a StreamingQueryListener announces, in onQueryProgress of batch N, the range from the
  previous announced end to batch N's watermark: every row below that watermark arrived in batches
  up to N, which are written by then. An empty or reversed range (an idle trigger, a watermark that
  did not move) is never sent. The first range starts at the first row's minute.
- A late row (event time below the range already announced) is still written; its minute goes out
  again as a reprocessing event: the same asset and range with a new `version`
  (`<version>+late.b<batch>`), so a rollup with `rerun: on_update` reruns that period. It is never a
  silent loss.
- Every event's id comes from the batch id (`spark-<asset>-b<N>`, `...-b<N>-late<k>`): a batch Spark
  runs again after a restart announces the same events, which the daemon ingests once. The
  announced end and the batch are kept in <checkpoint>/coverage-rollup.json across restarts.

The events go out through the producer helper of the coverage-rollup package
(coverage_rollup.producer.Producer.from_env): run beside a daemon (in the directory it was started
in, or with COVERAGE_ROLLUP_DATA_DIR set to its data directory) it finds the daemon's queue backend,
queue, prefix and groups and, for the embedded default, its database in the daemon's record; the
environment (QUEUE_BACKEND, REDIS_URL, DATABASE_URL, QUEUE_NAME, QUEUE_PREFIX, QUEUE_GROUPS) and the
options win over it, and with no URL from any of them it refuses to start (docs/events.md
"Producers"). With queue.groups > 1 it routes the asset to its group's queue, as the daemon does.
"""

import argparse
import asyncio
import json
import os
import signal
import threading
import time
from datetime import datetime, timezone

from coverage_rollup.producer import Producer
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQueryListener

MINUTE = 60
# The options that pass to Producer.from_env as they are named there.
SETTINGS = ("redis_url", "database_url", "queue", "prefix", "groups")


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_watermark(text: str) -> float:
    """Spark writes `2025-06-01T10:15:00.000Z`."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class Announcer:
    """The package's producer helper on an event loop of its own: Spark calls us from its callback
    threads."""

    def __init__(self, producer: Producer):
        self.producer = producer
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=60)

    def send(self, event: dict) -> None:
        self.call(self.producer.announce([event]))

    def close(self) -> None:
        self.call(self.producer.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


class CoverageState:
    """What the job has announced: the end of the complete range, per-batch facts, the events sent."""

    def __init__(self, path: str):
        self.path = path
        self.lock = threading.Lock()
        self.announced_end: float | None = None
        self.first_minute: float | None = None
        self.batches: dict[int, list[int]] = {}  # batch id -> the distinct minutes of its rows
        self.progressed: list[int] = []  # batch ids whose progress was handled
        self.events: list[dict] = []
        if os.path.exists(path):
            with open(path) as f:
                saved = json.load(f)
            self.announced_end = saved.get("announced_end")
            self.first_minute = saved.get("first_minute")
            self.progressed = saved.get("progressed", [])
            self.events = saved.get("events", [])

    def save(self) -> None:
        tmp = f"{self.path}.tmp"
        with open(tmp, "w") as f:
            json.dump(
                {
                    "announced_end": self.announced_end,
                    "first_minute": self.first_minute,
                    "progressed": self.progressed,
                    "events": self.events,
                },
                f,
            )
        os.replace(tmp, self.path)


def minute_runs(minutes: list[int], below: float) -> list[tuple[float, float]]:
    """Contiguous runs of whole minutes, each [start, end) clipped to end at `below`."""
    runs: list[tuple[float, float]] = []
    for m in sorted(set(minutes)):
        start = m * MINUTE
        if start >= below:
            break
        end = min(start + MINUTE, below)
        if runs and runs[-1][1] == start:
            runs[-1] = (runs[-1][0], end)
        else:
            runs.append((start, end))
    return runs


class WatermarkListener(StreamingQueryListener):
    """Announces, per batch progress, the range between the previous and the current watermark."""

    def __init__(self, args: argparse.Namespace, state: CoverageState, announcer: Announcer, done: threading.Event):
        self.args = args
        self.state = state
        self.announcer = announcer
        self.done = done
        self.stop_at = parse_watermark(args.stop_at_watermark) if args.stop_at_watermark else None

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryIdle(self, event) -> None:
        pass

    def onQueryTerminated(self, event) -> None:
        self.done.set()

    def onQueryProgress(self, event) -> None:
        progress = event.progress
        batch_id = progress.batchId
        watermark_text = (progress.eventTime or {}).get("watermark")
        state = self.state
        with state.lock:
            minutes = state.batches.pop(batch_id, None)
            if minutes is None:  # an idle trigger's progress: no batch ran, nothing was written
                return
            asset, version = self.args.asset, self.args.version
            end_before = state.announced_end
            # Late rows: minutes below what is already announced were written again just now.
            if end_before is not None:
                for k, (start, end) in enumerate(minute_runs(minutes, end_before)):
                    self._send(
                        {
                            "asset": asset,
                            "start": iso(start),
                            "end": iso(end),
                            "version": f"{version}+late.b{batch_id}",
                            "id": f"spark-{asset}-b{batch_id}-late{k}",
                            "extra": {"batch_id": batch_id, "kind": "late_rows"},
                        }
                    )
            watermark = parse_watermark(watermark_text) if watermark_text else 0.0
            start = end_before if end_before is not None else state.first_minute
            if start is not None and watermark > start:
                self._send(
                    {
                        "asset": asset,
                        "start": iso(start),
                        "end": iso(watermark),
                        "version": version,
                        "id": f"spark-{asset}-b{batch_id}",
                        "extra": {"batch_id": batch_id, "kind": "watermark", "watermark": watermark_text},
                    }
                )
                state.announced_end = watermark
            state.progressed.append(batch_id)
            state.save()
            if self.stop_at is not None and (state.announced_end or 0) >= self.stop_at:
                self.done.set()

    def _send(self, event: dict) -> None:
        event["produced_at"] = iso(time.time())
        self.announcer.send(event)
        self.state.events.append(event)


def main() -> None:
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--input", required=True, help="folder of JSON files (event_time, order_id)")
    parser.add_argument("--output", required=True, help="the file sink (JSON)")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--asset", required=True)
    parser.add_argument("--version", default="v1", help="the job's code version, on every event")
    parser.add_argument("--delay", default="5 minutes", help="withWatermark delay threshold")
    # Unset: the environment, else the daemon beside us (Producer.from_env).
    parser.add_argument("--redis-url", help="the daemon's Redis (queue.backend: redis)")
    parser.add_argument("--database-url", help="the daemon's PostgreSQL (queue.backend: postgres)")
    parser.add_argument("--queue", help="queue.name")
    parser.add_argument("--prefix", help="queue.prefix")
    parser.add_argument("--groups", type=int, help="queue.groups")
    parser.add_argument("--trigger", default="1 second", help="processingTime trigger")
    parser.add_argument("--stop-at-watermark", help="stop once the announced end reaches this instant (ISO)")
    parser.add_argument("--timeout", type=float, default=None, help="stop after this many seconds")
    args = parser.parse_args()
    settings = {k: v for k, v in vars(args).items() if k in SETTINGS and v is not None}
    if args.redis_url:
        settings["backend"] = "redis"
    elif args.database_url:
        settings["backend"] = "postgres"
    try:
        producer = Producer.from_env(**settings)
    except ValueError as error:
        parser.exit(
            2,
            f"spark_foreach_batch.py: {error}: run it in the directory the daemon was started in (or set "
            "COVERAGE_ROLLUP_DATA_DIR to its data directory), or give the daemon's queue URL\n",
        )

    spark = (
        SparkSession.builder.master(env("SPARK_MASTER", "local[2]"))
        .appName(f"coverage-rollup-{args.asset}")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    os.makedirs(args.checkpoint, exist_ok=True)
    state = CoverageState(os.path.join(args.checkpoint, "coverage-rollup.json"))
    announcer = Announcer(producer)
    done = threading.Event()
    spark.streams.addListener(WatermarkListener(args, state, announcer, done))

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        batch.write.mode("append").json(args.output)
        # The distinct minutes of the batch's rows (a few per batch), for the listener's late-row check.
        rows = batch.select((F.col("event_time").cast("long") / MINUTE).cast("long").alias("m")).distinct().collect()
        minutes = [r.m for r in rows if r.m is not None]
        with state.lock:
            if minutes and state.first_minute is None:
                state.first_minute = float(min(minutes) * MINUTE)
            state.batches[batch_id] = minutes

    stream = (
        spark.readStream.schema("event_time TIMESTAMP, order_id STRING")
        .option("maxFilesPerTrigger", 1)
        .json(args.input)
        .withWatermark("event_time", args.delay)
    )
    query = (
        stream.writeStream.foreachBatch(write_batch)
        .option("checkpointLocation", os.path.join(args.checkpoint, "spark"))
        .trigger(processingTime=args.trigger)
        .start()
    )
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        done.wait(args.timeout)
    finally:
        query.stop()
        announcer.close()
        spark.stop()
    with state.lock:
        print(json.dumps({"announced_end": state.announced_end, "events": state.events}), flush=True)


if __name__ == "__main__":
    main()
