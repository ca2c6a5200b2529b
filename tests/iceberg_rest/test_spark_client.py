"""A second Spark session reads and writes the lake through the REST catalog
(`org.apache.iceberg.rest.RESTCatalog` via SparkCatalog type=rest), as another team's Spark
would: it lists exactly the permitted tables, reads the rows Shoal reads, appends with
INSERT, and is refused for a restricted grant. Same JVM, its own session and catalog names."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def engine(spark, rest, lake):
    other = spark.newSession()
    for user in ("analyst", "cols"):
        prefix = f"spark.sql.catalog.rest_{user}"
        # Exactly the settings docs/engines.md gives (credential = the user's Shoal API token).
        other.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
        other.conf.set(f"{prefix}.type", "rest")
        other.conf.set(f"{prefix}.uri", rest.url)
        other.conf.set(f"{prefix}.credential", lake.tokens[user])
        other.conf.set(f"{prefix}.oauth2-server-uri", f"{rest.url}/v1/oauth/tokens")
    return other


def _rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def test_spark_lists_reads_appends_and_is_refused(engine, spark, lake):
    shown = {r["tableName"] for r in engine.sql(f"SHOW TABLES IN rest_analyst.{lake.db}").collect()}
    assert shown == {"sales"}
    assert {r[0] for r in engine.sql("SHOW NAMESPACES IN rest_analyst").collect()} == {lake.db}
    assert _rows(engine.table(f"rest_analyst.{lake.sales}")) == _rows(spark.table(lake.sales))

    engine.sql(f"INSERT INTO rest_analyst.{lake.sales} (id, region, amount) VALUES (900, 'EU', 9.5)")
    assert spark.sql(f"SELECT amount FROM {lake.sales} WHERE id = 900").first()[0] == 9.5

    with pytest.raises(Exception, match="PostgreSQL endpoint"):
        engine.table(f"rest_cols.{lake.opps}").collect()
    with pytest.raises(Exception, match="(?i)not found|cannot be found"):
        engine.table(f"rest_analyst.{lake.hr}").collect()
