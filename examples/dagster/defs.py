"""A Dagster code location fed by coverage-rollup (docs/targets/dagster.md).

    pip install dagster==1.13.28 dagster-webserver==1.13.28 ./python/coverage-rollup ./python/dagster-coverage-rollup
    COVERAGE_ROLLUP_URL=http://127.0.0.1:8080 COVERAGE_ROLLUP_TOKEN=... \\
        dagster dev -f examples/dagster/defs.py -h 127.0.0.1 -p 3000

The rollup `orders_hourly` (upstream warehouse.orders, every hour) decides when an hour of orders
is complete. Two ways reach Dagster, used together here:

- Its `dagster` target reports each decision as a materialization of `warehouse/orders_hourly`
  (an external asset: Dagster does not compute it), partition = the hour in Dagster's hourly key
  form (`partition_format: yyyy-MM-dd-HH:mm`), data version = `{rollup}#{generation}`.
- The sensor `orders_hourly_covered_periods` (dagster-coverage-rollup) runs `orders_hourly_report`
  for each hour the rollup triggered, with that hour's partition key: an hour with a hole is not
  run, and runs once the hole is filled, however old; a reprocessed hour runs again. Turn it on in
  the UI (Automation).
- The check `coverage` reports, in each of those runs, how much of the hour warehouse.orders
  covers and which ranges are missing.

A rollup's `repair:` target of type `dagster` asks for the ranges holding a period back as an
observation of `warehouse/orders_repairs` (POST /report_asset_observation/warehouse/orders_repairs),
the request's fields in the metadata (docs/repairs.md). The sensor `orders_repair_requests`
turns each new one into a run of `orders_backfill`, keyed by the request attempt's idempotency key,
whose op rebuilds the ranges and announces them to coverage-rollup with the package's client.
"""

import json

import dagster as dg
from dagster_coverage_rollup import (
    CoverageRollupResource,
    build_coverage_check,
    build_coverage_rollup_sensor,
)

HOURLY = dg.HourlyPartitionsDefinition(start_date="2026-01-01-00:00", timezone="UTC")

orders_hourly = dg.AssetSpec(
    key=["warehouse", "orders_hourly"],
    partitions_def=HOURLY,
    description="warehouse.orders, one partition per hour that coverage-rollup found covered",
)


@dg.asset(deps=[orders_hourly], partitions_def=HOURLY)
def orders_hourly_report(context: dg.AssetExecutionContext) -> None:
    """A downstream asset of the covered hours, run by the coverage sensor."""
    context.log.info(f"building the report of hour {context.partition_key}")


orders_repairs = dg.AssetSpec(
    key=["warehouse", "orders_repairs"],
    description="coverage-rollup's repair requests for warehouse.orders: one observation per attempt",
)


@dg.op(config_schema={"request": str})
def backfill(context: dg.OpExecutionContext, coverage_rollup: CoverageRollupResource) -> None:
    """Rebuild each requested range, then announce it to coverage-rollup (POST /v1/events)."""
    request = json.loads(context.op_config["request"])
    with coverage_rollup.get_client() as client:
        for i, r in enumerate(request["ranges"]):
            # ... rebuild request["asset"] over [r["start"], r["end"]) here (a stand-in: a log
            # line), then announce it; the id makes a retried run announce nothing twice ...
            context.log.info(f"rebuilding {request['asset']} over [{r['start']}, {r['end']})")
            client.announce(
                request["asset"],
                r["start"],
                r["end"],
                version=r["required_version"] or "backfill",
                id=f"{request['idempotency_key']}/{i}",
            )


@dg.job
def orders_backfill() -> None:
    backfill()


@dg.sensor(job=orders_backfill, minimum_interval_seconds=30)
def orders_repair_requests(context: dg.SensorEvaluationContext):
    """A run per repair request attempt observed since the last evaluation (the cursor)."""
    result = context.instance.fetch_observations(
        orders_repairs.key, limit=100, cursor=context.cursor, ascending=True
    )
    for record in result.records:
        metadata = record.asset_observation.metadata
        if "idempotency_key" not in metadata:
            continue  # another observation of the asset
        request = {label: value.value for label, value in metadata.items()}
        yield dg.RunRequest(
            run_key=request["idempotency_key"],
            run_config={"ops": {"backfill": {"config": {"request": json.dumps(request)}}}},
        )
    context.update_cursor(result.cursor)


defs = dg.Definitions(
    assets=[orders_hourly, orders_hourly_report, orders_repairs],
    asset_checks=[build_coverage_check(orders_hourly_report, "warehouse.orders")],
    jobs=[orders_backfill],
    sensors=[
        build_coverage_rollup_sensor("orders_hourly", target=orders_hourly_report),
        orders_repair_requests,
    ],
    resources={
        "coverage_rollup": CoverageRollupResource(
            url=dg.EnvVar("COVERAGE_ROLLUP_URL"), token=dg.EnvVar("COVERAGE_ROLLUP_TOKEN")
        )
    },
)
