"""docs/reading-tables.md: a table Shoal wrote, read by PyIceberg and DuckDB as the page shows."""

from __future__ import annotations

import uuid

from helpers import apply, write_csv


def test_pyiceberg_and_duckdb_read_what_shoal_wrote(spark, settings, tmp_path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    table = f"docs_{uuid.uuid4().hex[:6]}.products"
    src = tmp_path / "changes"
    src.mkdir()
    write_csv(
        src,
        "1.csv",
        [
            ["I", 1, "garden", "rake", 5, "2024-01-01 00:00:00"],
            ["I", 2, "kitchen", "pan", 3, "2024-01-01 00:00:00"],
            ["I", 3, "garden", "hose", 7, "2024-01-01 00:00:00"],
        ],
    )
    apply(settings, src, table)
    write_csv(
        src,
        "2.csv",
        [["D", 2, "kitchen", "pan", 3, "2024-01-02 00:00:00"], ["U", 3, "garden", "hose", 9, "2024-01-02 00:00:00"]],
    )
    apply(settings, src, table)
    expected = sorted(tuple(r) for r in spark.sql(f"SELECT product_id, quantity FROM {table}").collect())
    assert expected == [(1, 5), (3, 9)]

    catalog = SqlCatalog(settings.catalog.name, uri=settings.catalog_sqlalchemy_uri, warehouse=settings.warehouse_uri)
    iceberg = catalog.load_table(table)
    arrow = iceberg.scan(selected_fields=("product_id", "quantity")).to_arrow()
    assert sorted(zip(arrow["product_id"].to_pylist(), arrow["quantity"].to_pylist(), strict=True)) == expected
    # Time travel to the first snapshot sees the deleted row again.
    first = iceberg.history()[0].snapshot_id
    old = iceberg.scan(snapshot_id=first, selected_fields=("product_id",)).to_arrow()
    assert sorted(old["product_id"].to_pylist()) == [1, 2, 3]

    con = iceberg.scan().to_duckdb(table_name="products")
    rows = con.sql("SELECT product_id, quantity FROM products ORDER BY product_id").fetchall()
    assert rows == expected
    by_category = dict(con.sql("SELECT category, count(*) FROM products GROUP BY category").fetchall())
    assert by_category == {"garden": 2}
