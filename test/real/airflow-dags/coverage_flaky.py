"""A test DAG for test/real/airflow-dagruns.real.test.ts (not an example).

Attempt 1 of a decision fails on purpose, so the daemon retries it as attempt 2. A task instance run
again after a clear in Airflow (try_number > 1) waits until the test creates the file
$CR_GATE_DIR/<run_id>, so the test sees the reopened run before it finishes.
"""

import os
import time

from airflow.sdk import dag, get_current_context, task


@dag(schedule=None, catchup=False, tags=["coverage-rollup-test"])
def coverage_flaky():
    @task(retries=0)
    def flaky() -> dict:
        context = get_current_context()
        payload = context["dag_run"].conf
        run_id = context["dag_run"].run_id
        ti = context["ti"]
        if ti.try_number > 1:
            gate = os.path.join(os.environ["CR_GATE_DIR"], run_id)
            while not os.path.exists(gate):
                time.sleep(0.5)
        if payload.get("attempt", 1) == 1:
            raise RuntimeError(f"attempt 1 of {payload['idempotency_key']} fails on purpose")
        return {"attempt": payload["attempt"], "try_number": ti.try_number}

    flaky()


coverage_flaky()
