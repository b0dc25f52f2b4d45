"""A Dagster code location that receives coverage-rollup's decisions (docs/targets/dagster.md).

    pip install dagster==1.13.28 dagster-webserver==1.13.28
    dagster-webserver -f examples/dagster/defs.py -h 127.0.0.1 -p 3000

coverage-rollup's `dagster` target reports each decision of a rollup as a materialization of
`warehouse/orders_hourly` (POST /report_asset_materialization/warehouse/orders_hourly): partition =
the period's hour in Dagster's hourly key form (the target's `partition_format: yyyy-MM-dd-HH:mm`),
data version = `{rollup}#{generation}`, and the coverage in the metadata. The asset is declared here
as an external asset (an AssetSpec: Dagster does not compute it) with the partitions the rollup
decides, so the UI, sensors and automation conditions downstream of it see each covered hour.

A rollup's `repair:` target of type `dagster` asks for the ranges holding a period back as an
observation of `warehouse/orders_repairs` (POST /report_asset_observation/warehouse/orders_repairs),
the request's fields in the metadata (docs/repairs.md). The sensor `orders_repair_requests`
turns each new one into a run of `orders_backfill`, keyed by the request attempt's idempotency key,
whose op rebuilds the ranges and announces them to coverage-rollup (a stand-in here: print).
"""

import json

import dagster as dg

HOURLY = dg.HourlyPartitionsDefinition(start_date="2026-01-01-00:00", timezone="UTC")

orders_hourly = dg.AssetSpec(
    key=["warehouse", "orders_hourly"],
    partitions_def=HOURLY,
    description="warehouse.orders, one partition per hour that coverage-rollup found covered",
)


@dg.asset(deps=[orders_hourly], partitions_def=HOURLY)
def orders_hourly_report(context: dg.AssetExecutionContext) -> None:
    """A downstream asset of the covered hours (run it from the UI, a sensor or an automation condition)."""
    context.log.info(f"building the report of hour {context.partition_key}")


orders_repairs = dg.AssetSpec(
    key=["warehouse", "orders_repairs"],
    description="coverage-rollup's repair requests for warehouse.orders: one observation per attempt",
)


@dg.op(config_schema={"request": str})
def backfill(context: dg.OpExecutionContext) -> None:
    """Rebuild each requested range, then announce it to coverage-rollup (POST /v1/events)."""
    request = json.loads(context.op_config["request"])
    for i, r in enumerate(request["ranges"]):
        # ... rebuild request["asset"] over [r["start"], r["end"]), then announce it with
        # version r["required_version"] or "backfill" and id f"{request['idempotency_key']}/{i}" ...
        context.log.info(f"rebuilding {request['asset']} over [{r['start']}, {r['end']})")


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
    jobs=[orders_backfill],
    sensors=[orders_repair_requests],
)
