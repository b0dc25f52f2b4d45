"""The DAG the `airflow` target triggers (docs/targets/airflow.md): one dag run per decision.

coverage-rollup creates each run with `POST /api/v2/dags/coverage_dagrun/dagRuns`: the period as the
data interval, the trigger payload in `conf`. `schedule=None`: Airflow keeps one run per logical
date, so a DAG that also scheduled itself would collide with these runs. Tested with Airflow 3.3.2
by `npm run test:real` (test/real/airflow-dagruns.real.test.ts).
"""

from datetime import timedelta

from airflow.sdk import dag, get_current_context, task


@dag(
    schedule=None,
    catchup=False,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=10)},
    tags=["coverage-rollup"],
)
def coverage_dagrun():
    @task
    def build() -> dict:
        context = get_current_context()
        payload = context["dag_run"].conf  # the trigger payload (docs/rollups.md "Triggers")
        print(
            f"{payload['rollup']} period {payload['period']['key']} generation {payload['generation']}"
            f" attempt {payload.get('attempt', 1)}: {context['data_interval_start']} .. {context['data_interval_end']}"
        )
        # ... build the period from data_interval_start / data_interval_end here ...
        return {
            "ds": context["ds"],
            "data_interval_start": context["data_interval_start"].isoformat(),
            "data_interval_end": context["data_interval_end"].isoformat(),
            "logical_date": context["logical_date"].isoformat(),
            "idempotency_key": payload["idempotency_key"],
            "generation": payload["generation"],
            "attempt": payload.get("attempt", 1),
        }

    build()


coverage_dagrun()
