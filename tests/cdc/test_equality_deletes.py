"""Issue 45: could a CDC batch commit its keys as an equality-delete file (Flink's way) and
skip reading the table? Only if every reader Shoal documents reads such a table correctly.

This test writes one equality delete by hand (pyarrow Parquet with the key's field id,
registered by Iceberg's Java API in one row-delta) and records what each reader does:
Spark (Iceberg Java) applies it; PyIceberg 0.12 refuses to plan the scan, and DuckDB
(through PyIceberg's `to_duckdb`, as docs/reading-tables.md shows) and the REST catalog's
PyIceberg clients with it. So the batch keeps position deletes. When this test fails
because PyIceberg reads the table, the design can be reconsidered (docs/cdc.md).
"""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shoal.cdc import rowdelta
from tests.support.helpers import apply, product_state, write_full_load


def test_equality_deletes_are_read_by_spark_but_not_by_pyiceberg(spark, settings, source, tmp_path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    table = f"eqdel_{uuid.uuid4().hex[:6]}.products"
    write_full_load(source)
    apply(settings, source, table)
    assert [r[0] for r in product_state(spark, table)] == [101, 102, 103]

    jtable = rowdelta.iceberg_table(spark, f"{settings.catalog.name}.{table}")
    field_id = int(jtable.schema().findField("product_id").fieldId())
    path = tmp_path / "eq-deletes.parquet"
    schema = pa.schema([pa.field("product_id", pa.int64(), False, {b"PARQUET:field_id": str(field_id)})])
    pq.write_table(pa.table({"product_id": [102]}, schema=schema), path)
    jvm = spark.sparkContext._jvm
    ids = spark.sparkContext._gateway.new_array(jvm.int, 1)
    ids[0] = field_id
    delete = (
        jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(jtable.spec())
        .ofEqualityDeletes(ids)
        .withPath(f"file:{path}")
        .withFormat(jvm.org.apache.iceberg.FileFormat.PARQUET)
        .withFileSizeInBytes(path.stat().st_size)
        .withRecordCount(1)
        .build()
    )
    jtable.newRowDelta().addDeletes(delete).commit()
    spark.sql(f"REFRESH TABLE {table}")

    # Spark (Iceberg Java) applies the equality delete.
    assert [r[0] for r in product_state(spark, table)] == [101, 103]

    # PyIceberg 0.12 does not: its scan planning raises on an equality-delete file.
    catalog = SqlCatalog(settings.catalog.name, uri=settings.catalog_sqlalchemy_uri, warehouse=settings.warehouse_uri)
    with pytest.raises(ValueError, match="equality deletes"):
        catalog.load_table(table).scan().to_arrow()
