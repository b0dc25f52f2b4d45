"""The coverage-rollup wheel against a live daemon, for test/real/python-client.real.test.ts.

    python client_live.py URL TOKEN BACKEND BROKER_URL PREFIX GROUPS

Runs the client's calls (sync and async) and the producer helper, and prints one JSON line of what
it saw; the test asserts on it. Every asset name is new to the daemon.
"""

import asyncio
import json
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

from coverage_rollup import ApiError, AsyncClient, Client, Event
from coverage_rollup.producer import Producer

URL, TOKEN, BACKEND, BROKER_URL, PREFIX, GROUPS = sys.argv[1:7]
UTC = timezone.utc
T0 = datetime(2025, 6, 1, 10, tzinfo=UTC)
T1 = T0 + timedelta(minutes=30)
T2 = T0 + timedelta(hours=1)


def code_of(call) -> str:  # type: ignore[no-untyped-def]
    """The API error's code, and the first event's reason for invalid_events."""
    try:
        call()
    except ApiError as error:
        reasons = [e["reason"] for e in error.details.get("errors", [])]
        return f"{error.code} {reasons[0]}" if reasons else error.code
    return "no error"


def sync_calls(seen: dict) -> None:
    with Client(URL, TOKEN) as client:
        announced = client.announce("live.sync", T0, T1, "v1", "live-sync-1")
        seen["announce"] = {"accepted": announced.accepted, "committed": announced.committed}
        first = client.wait_covered("live.sync", T0, T1, timeout=30)
        seen["indexed"] = first.covered
        half = client.coverage("live.sync", T0, T2)
        seen["half"] = {
            "covered": half.covered,
            "ratio": half.ratio,
            "missing": [[s.isoformat(), e.isoformat()] for s, e in half.missing],
            "missing_total": half.missing_total,
            "start_is_aware": half.start.tzinfo is not None,
            "versions": sorted({b.version for b in half.batches if b.version}),
        }
        many = client.announce(
            [Event("live.ints", i * 10, i * 10 + 10, id=f"ints-{i}") for i in range(5)]
            + [Event("live.ints", 60, 100, id="ints-late")]
        )
        seen["many"] = many.accepted
        ints = client.wait_covered("live.ints", 0, 50, timeout=30)
        gap = client.coverage("live.ints", 0, 100)
        seen["ints"] = {"covered": ints.covered, "missing": gap.missing, "ratio": gap.ratio}
        seen["errors"] = {
            "coverage_end_before_start": code_of(lambda: client.coverage("live.sync", T2, T0)),
            "coverage_unknown_asset": code_of(lambda: client.coverage("live.never-seen", T0, T1)),
            "announce_end_before_start": code_of(lambda: client.announce("live.sync", T1, T0)),
            "announce_other_domain": code_of(lambda: client.announce("live.ints", T0, T1)),
        }
        timed_out = time.monotonic()
        late = client.wait_covered("live.sync", T0, T2, timeout=1.5)
        seen["timeout"] = {
            "covered": late.covered,
            "waited_s": round(time.monotonic() - timed_out, 2),
            "missing_count": late.missing_count,
        }


async def woken_by_commit(seen: dict) -> None:
    """wait_covered held open on the daemon, woken by an event sent through the producer helper."""
    waits: list[str] = []
    options = {"backend": BACKEND, "prefix": PREFIX, "groups": int(GROUPS)}
    options["redis_url" if BACKEND == "redis" else "database_url"] = BROKER_URL
    async with AsyncClient(URL, TOKEN) as client, Producer(**options) as producer:
        await producer.announce("live.async", T0, T1, "v1", "live-async-1")
        await client.wait_covered("live.async", T0, T1, timeout=30)
        waiting = asyncio.create_task(
            client.wait_covered("live.async", T0, T2, timeout=60, on_wait=lambda a: waits.append(a.describe_missing()))
        )
        await asyncio.sleep(1.0)  # the request is held by the daemon meanwhile
        sent = time.monotonic()
        ids = await producer.announce([Event("live.async", T1, T2, "v1", "live-async-2")])
        answer = await waiting
        seen["woken"] = {
            "covered": answer.covered,
            "ms_after_send": round((time.monotonic() - sent) * 1000),
            "job_ids": len(ids),
            "early_answers": waits,
        }
        # Several assets at once through the helper: each to its group, all indexed.
        assets = [f"live.group.{i}" for i in range(6)]
        await producer.announce([Event(a, T0, T2, "v1", f"{a}-1") for a in assets])
        locations = {a: producer.location(a) for a in assets}
        covered = []
        for asset in assets:
            covered.append((await client.wait_covered(asset, T0, T2, timeout=30)).covered)
        seen["groups"] = {"locations": locations, "covered": covered}


def main() -> None:
    seen: dict = {}
    sync_calls(seen)
    asyncio.run(woken_by_commit(seen))
    # A sync client's wait from another thread, woken by the async client's announce.
    result: dict = {}
    with Client(URL, TOKEN) as client:
        thread = threading.Thread(
            target=lambda: result.update(answer=client.wait_covered("live.thread", 0, 10, timeout=60))
        )
        thread.start()
        time.sleep(1.0)
        asyncio.run(announce_async("live.thread", 0, 10))
        thread.join()
    seen["thread"] = result["answer"].covered
    print(json.dumps(seen, default=str), flush=True)


async def announce_async(asset: str, start: int, end: int) -> None:
    async with AsyncClient(URL, TOKEN) as client:
        await client.announce(asset, start, end)


if __name__ == "__main__":
    main()
