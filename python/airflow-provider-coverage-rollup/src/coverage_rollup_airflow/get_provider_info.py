"""What the ``apache_airflow_provider`` entry point returns: Airflow reads it to list this
provider, its connection type (with its form) and the modules of its hooks, sensors, triggers
and operators."""

from __future__ import annotations

from typing import Any

from coverage_rollup_airflow import __version__

INTEGRATION = "coverage-rollup"
HOOK = "coverage_rollup_airflow.hooks.coverage_rollup.CoverageRollupHook"

#: The connection form. Airflow 3.2 and later read it from the provider info (kebab-case keys),
#: 3.0 and 3.1 from the hook's get_ui_field_behaviour().
FORM: dict[str, Any] = {
    "hidden_fields": ["schema", "login"],
    "relabeling": {"host": "URL", "password": "Token"},
    "placeholders": {
        "host": "http://coverage-rollup:8080",
        "port": "(optional: in the URL)",
        "password": "a read token (sensors) or a write token from api_tokens (announce)",
    },
}


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "airflow-provider-coverage-rollup",
        "name": "coverage-rollup",
        "description": "Wait for and announce interval coverage of assets with coverage-rollup: "
        "is [start, end) of an asset covered, and if not, which ranges are missing?",
        "versions": [__version__],
        "integrations": [{"integration-name": INTEGRATION, "tags": ["service"]}],
        "hooks": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["coverage_rollup_airflow.hooks.coverage_rollup"],
            }
        ],
        "sensors": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["coverage_rollup_airflow.sensors.coverage"],
            }
        ],
        "operators": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["coverage_rollup_airflow.operators.announce"],
            }
        ],
        "triggers": [
            {
                "integration-name": INTEGRATION,
                "python-modules": ["coverage_rollup_airflow.triggers.coverage"],
            }
        ],
        "connection-types": [
            {
                "hook-class-name": HOOK,
                "hook-name": "coverage-rollup",
                "connection-type": "coverage_rollup",
                "ui-field-behaviour": {k.replace("_", "-"): v for k, v in FORM.items()},
            }
        ],
    }
