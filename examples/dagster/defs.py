"""A Dagster code location that receives coverage-rollup's decisions (README "Dagster").

    pip install dagster==1.13.28 dagster-webserver==1.13.28
    dagster-webserver -f examples/dagster/defs.py -h 127.0.0.1 -p 3000

coverage-rollup's `dagster` target reports each decision of a rollup as a materialization of
`warehouse/orders_hourly` (POST /report_asset_materialization/warehouse/orders_hourly): partition =
the period's hour in Dagster's hourly key form (the target's `partition_format: yyyy-MM-dd-HH:mm`),
data version = `{rollup}#{generation}`, and the coverage in the metadata. The asset is declared here
as an external asset (an AssetSpec: Dagster does not compute it) with the partitions the rollup
decides, so the UI, sensors and automation conditions downstream of it see each covered hour.
"""

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


defs = dg.Definitions(assets=[orders_hourly, orders_hourly_report])
