"""The routing rule against vectors printed by the daemon's own code (src/core/routing.ts,
src/queue/schema.ts): a producer that disagreed would put an asset on a queue no one reads."""

import pytest

from coverage_rollup.routing import fnv1a32, group_of, group_prefix, queue_schema

# [asset, fnv1a32(asset), group of the trimmed name among 3, among 1024]
ASSETS = [
    ("warehouse.orders", 2005208703, 0, 639),
    ("py.orders", 876158141, 2, 189),
    ("py.payments", 355853115, 0, 827),
    (" padded.asset\u00a0", 1286405485, 1, 649),
    ("\ufeffbom.asset", 1544023804, 1, 347),
    ("ünïcödé/表", 314771124, 0, 692),
    ("emoji.🙂", 2711587831, 1, 1015),
]

SCHEMAS = [
    ("bull", "bull"),
    ("{bull-0}", "_bull_0__414378f5"),
    ("{coverage-rollup-2}", "_coverage_rollup_2__e3cb5101"),
    ("9lives", "_9lives_e2f29fc7"),
    ("x" * 70, "x" * 54 + "_77f3c97d"),
    ("pre🙂fix", "pre__fix_9e924b33"),
    ("_ok_123", "_ok_123"),
]


@pytest.mark.parametrize(("asset", "hashed", "of3", "of1024"), ASSETS)
def test_groups_match_the_daemon(asset: str, hashed: int, of3: int, of1024: int) -> None:
    assert fnv1a32(asset) == hashed
    assert group_of(asset, 3) == of3
    assert group_of(asset, 1024) == of1024
    assert group_of(asset, 1) == 0


def test_readme_vector() -> None:
    assert fnv1a32("warehouse.orders") == 0x77850E7F


@pytest.mark.parametrize(("prefix", "schema"), SCHEMAS)
def test_schemas_match_the_daemon(prefix: str, schema: str) -> None:
    assert queue_schema(prefix) == schema


def test_group_prefix() -> None:
    assert group_prefix("bull", 1, 0) == "bull"
    assert group_prefix("bull", 3, 2) == "{bull-2}"


@pytest.mark.parametrize("groups", [0, -1, True, 1.5])
def test_groups_must_be_a_positive_integer(groups: object) -> None:
    with pytest.raises(ValueError, match="groups"):
        group_of("a", groups)  # type: ignore[arg-type]
