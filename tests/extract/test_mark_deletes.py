"""Planning after the mark reads the files appended since it, which carry no row-level deletes:
a row deleted and written again since then (issue 47's reverted landing: a test undid a run's
child objects and registered them again in the worker's shared lake) must not be planned twice.
Any snapshot since the mark that is not an append makes the run plan in full.

In a lake of its own (test_plan_shortcut's fixture), so its deletes touch no other test's rows."""

from __future__ import annotations

import pytest

from shoal.exceptions import ShoalError
from shoal.extract import run_extract
from shoal.lake import metadata
from tests.extract.test_plan_shortcut import add_notes, lake

__all__ = ["lake"]  # the imported fixture


def _rows_per_object(spark, table: str, ids: set[str]) -> dict[str, int]:
    frame = metadata.for_ids(spark, spark.table(metadata.table(table).sql), sorted(ids))
    return {r.object_id: r["count"] for r in frame.groupBy("object_id").count().collect()}


def test_an_object_deleted_and_registered_again_after_the_mark_is_extracted_once(spark, lake, tmp_path):
    add_notes(spark, lake, tmp_path / "first", 1)
    assert run_extract(spark, lake).objects == 1  # a run over every type: it writes the mark
    new = add_notes(spark, lake, tmp_path / "second", 2)
    objects = metadata.table("objects").sql
    rows = metadata.for_ids(spark, spark.table(objects), sorted(new)).collect()
    assert len(rows) == 2
    # Undone and registered again: the first append's file still holds the deleted rows.
    spark.sql(f"DELETE FROM {objects} WHERE object_id IN {metadata.ids_sql(sorted(new))}")
    spark.createDataFrame(rows, spark.table(objects).schema).writeTo(objects).append()
    result = run_extract(spark, lake)
    assert result.objects == 2 and result.problems == []
    for table in ("objects", "object_index", "extractions", "text"):
        assert _rows_per_object(spark, table, new) == dict.fromkeys(new, 1), table
    assert run_extract(spark, lake).nothing_to_do


def test_two_fact_rows_of_a_new_object_write_no_index_row(spark, lake, tmp_path):
    from shoal.lake.object_index import FACTS, refresh_index

    (oid,) = add_notes(spark, lake, tmp_path / "notes", 1)
    index = metadata.table("object_index").sql
    spark.sql(f"DELETE FROM {index} WHERE object_id = '{oid}'")  # not indexed: the append branch
    nulls = [f"CAST(NULL AS {typ}) AS {c}" for c, (typ, _default) in FACTS.items()]
    facts = spark.createDataFrame([(oid,), (oid,)], "object_id STRING").selectExpr("object_id", *nulls)
    with pytest.raises(ShoalError, match="two fresh index rows"):  # refused before writing anything
        refresh_index(spark, [oid], facts=facts)
    assert _rows_per_object(spark, "object_index", {oid}) == {}
