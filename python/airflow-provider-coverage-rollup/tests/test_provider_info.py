"""What Airflow reads through the apache_airflow_provider entry point, checked against the schema
of the Airflow installed beside it (npm run py:check installs Airflow's own wheels)."""

import importlib.util
import json
from importlib.metadata import entry_points
from pathlib import Path

import jsonschema
import pytest

from coverage_rollup_airflow.get_provider_info import FORM, get_provider_info


def airflow_schema(name: str) -> dict[str, object]:
    spec = importlib.util.find_spec("airflow")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("Airflow is not installed beside the provider")
    folder = Path(next(iter(spec.submodule_search_locations)))
    return json.loads((folder / name).read_text())  # type: ignore[no-any-return]


def test_the_entry_point_is_registered() -> None:
    (found,) = [e for e in entry_points(group="apache_airflow_provider") if "coverage_rollup" in e.value]
    assert found.value == "coverage_rollup_airflow.get_provider_info:get_provider_info"
    assert found.load()() == get_provider_info()


def test_the_provider_info_is_valid_for_airflow() -> None:
    info = get_provider_info()
    jsonschema.validate(info, airflow_schema("provider_info.schema.json"))
    assert info["package-name"] == "airflow-provider-coverage-rollup"
    (connection,) = info["connection-types"]
    assert connection["connection-type"] == "coverage_rollup"
    hook_module, hook_class = connection["hook-class-name"].rsplit(".", 1)
    assert hook_module in info["hooks"][0]["python-modules"]
    assert hook_class == "CoverageRollupHook"


def test_the_connection_form_is_valid_for_airflow() -> None:
    jsonschema.validate(FORM, airflow_schema("customized_form_field_behaviours.schema.json"))
    behaviour = get_provider_info()["connection-types"][0]["ui-field-behaviour"]
    assert behaviour["hidden-fields"] == FORM["hidden_fields"]
    assert behaviour["relabeling"] == {"host": "URL", "password": "Token"}
