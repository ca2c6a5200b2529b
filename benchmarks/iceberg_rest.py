"""What routing Shoal's own Spark through the Iceberg REST catalog would cost (issue 34).

One SparkSession, one table, two catalogs over it: the JDBC catalog Shoal uses today, and
`shoal serve --iceberg-rest` in this process (signed in as admin). Times per statement:
a point query (plan = load the table through the catalog) and a one-row INSERT (a commit),
alternating between the catalogs so drift hits both alike. Run:
    python benchmarks/iceberg_rest.py [--rounds 10]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()

    from shoal.config import load_settings
    from shoal.governance import Principals
    from shoal.iceberg_rest import IcebergRestServer
    from shoal.spark import get_spark

    settings = load_settings(workspace=tempfile.mkdtemp(), spark={"shuffle_partitions": 2, "master": "local[2]"})
    spark = get_spark(settings)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS bench")
    spark.range(100_000).selectExpr("id", "id % 7 AS k").writeTo("bench.t").using("iceberg").create()
    srv = IcebergRestServer(settings, port=0).start()
    token = Principals(settings).create_token("admin")[1]
    for key, value in {
        "": "org.apache.iceberg.spark.SparkCatalog",
        ".type": "rest",
        ".uri": srv.url,
        ".credential": token,
        ".oauth2-server-uri": f"{srv.url}/v1/oauth/tokens",
        # As Shoal's JDBC catalog: no cache, since other processes commit to the same tables.
        ".cache-enabled": "false",
    }.items():
        spark.conf.set(f"spark.sql.catalog.rest{key}", value)
    catalogs = {"jdbc": settings.catalog.name, "rest": "rest"}
    for c in catalogs.values():  # warm both
        spark.sql(f"SELECT count(*) FROM {c}.bench.t WHERE id = 1").collect()
    times: dict[str, dict[str, list[float]]] = {n: {"query": [], "insert": []} for n in catalogs}
    for i in range(args.rounds):
        for name, c in catalogs.items():
            t0 = time.perf_counter()
            spark.sql(f"SELECT count(*) FROM {c}.bench.t WHERE id = {i}").collect()
            times[name]["query"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            spark.sql(f"INSERT INTO {c}.bench.t VALUES ({1_000_000 + i}, 0)")
            times[name]["insert"].append(time.perf_counter() - t0)
    for name, t in times.items():
        print(
            f"{name}: point query median {statistics.median(t['query']) * 1000:.0f} ms, "
            f"one-row INSERT median {statistics.median(t['insert']) * 1000:.0f} ms ({args.rounds} rounds)"
        )
    srv.stop()


if __name__ == "__main__":
    main()
