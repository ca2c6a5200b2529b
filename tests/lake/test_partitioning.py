from __future__ import annotations

import pytest

from shoal.exceptions import ShoalError
from shoal.lake.partitioning import partition_sql

COLS = ["product_id", "category", "updated_at", "name"]


def test_partition_spec_is_rendered_with_quoted_columns() -> None:
    assert (
        partition_sql("category, bucket(16, product_id), days(updated_at), truncate(4, name)", COLS)
        == "`category`, bucket(16, `product_id`), days(`updated_at`), truncate(4, `name`)"
    )


def test_partition_columns_match_case_insensitively() -> None:
    assert partition_sql("CATEGORY", COLS) == "`category`"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("colour", "not in the data"),
        ("bucket(0, product_id)", "unknown transform"),
        ("bucket(product_id)", "unknown transform"),
        ("upper(name)", "unknown transform"),
        ("category; DROP TABLE x", "not a list"),
        ("bucket(16, product_id, name)", "exactly one column"),
    ],
)
def test_bad_partition_specs_are_refused(spec: str, message: str) -> None:
    with pytest.raises(ShoalError, match=message):
        partition_sql(spec, COLS)
