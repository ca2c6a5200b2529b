"""DuckDB with its packaged iceberg extension ATTACHes the REST catalog (OAuth2 client
credentials, local files): lists exactly the permitted tables, reads the rows Shoal reads,
and is refused a restricted table.

DuckDB's iceberg extension exists as a wheel for DuckDB 1.5.5 only, and Shoal's own venv has
DuckDB 2.0, so the client runs in its own environment (`.venv-duckdb`, made by
`scripts/setup.sh test`; or SHOAL_DUCKDB_PYTHON). Extensions load by file path: nothing is
downloaded."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIENT = r"""
import json, sys, pathlib
import duckdb, duckdb_extension_avro, duckdb_extension_httpfs, duckdb_extension_iceberg

args = json.loads(sys.argv[1])
out = {}
for user, token in args["users"].items():
    con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
    for mod in (duckdb_extension_httpfs, duckdb_extension_avro, duckdb_extension_iceberg):
        ext = next(pathlib.Path(mod.__file__).parent.rglob("*.duckdb_extension"))
        con.execute(f"LOAD '{ext}'")
    # What docs/engines.md tells DuckDB users to type.
    con.execute(
        f"CREATE SECRET shoal (TYPE iceberg, CLIENT_ID '{user}', CLIENT_SECRET '{token}', "
        f"OAUTH2_SERVER_URI '{args['url']}/v1/oauth/tokens')"
    )
    if args.get("s3"):  # the client's own keys for the object store (no credentials are vended)
        s3 = args["s3"]
        con.execute(
            f"CREATE SECRET store (TYPE s3, KEY_ID '{s3['key']}', SECRET '{s3['secret']}', ENDPOINT '{s3['endpoint']}', "
            "URL_STYLE 'path', USE_SSL false, REGION 'us-east-1')"
        )
    con.execute(f"ATTACH 'lake' AS lake (TYPE iceberg, ENDPOINT '{args['url']}', SECRET shoal, ACCESS_DELEGATION_MODE 'none')")
    res = {"tables": sorted(f"{r[1]}.{r[2]}" for r in con.execute("SHOW ALL TABLES").fetchall() if r[0] == "lake")}
    for name in args["read"]:
        try:
            res[name] = sorted(list(r) for r in con.execute(f"SELECT * FROM lake.{name}").fetchall())
        except Exception as exc:
            res[name] = {"error": str(exc)}
    out[user] = res
print(json.dumps(out))
"""


def _python() -> str:
    exe = os.environ.get("SHOAL_DUCKDB_PYTHON") or str(ROOT / ".venv-duckdb" / "bin" / "python")
    if not Path(exe).exists():
        pytest.skip(
            "the DuckDB 1.5.5 client environment is missing: run scripts/setup.sh test (or set SHOAL_DUCKDB_PYTHON)"
        )
    return exe


def run_duckdb(tmp_path: Path, args: dict) -> dict:
    """Run the DuckDB client in its own environment; its findings per user, as JSON."""
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    proc = subprocess.run([_python(), str(script), json.dumps(args)], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_duckdb_attach_lists_reads_and_is_refused(rest, lake, spark, tmp_path):
    users = {lake.names["analyst"]: lake.tokens["analyst"], lake.names["cols"]: lake.tokens["cols"]}
    out = run_duckdb(tmp_path, {"url": rest.url, "users": users, "read": [lake.sales, lake.opps, lake.hr]})
    analyst, cols = out[lake.names["analyst"]], out[lake.names["cols"]]

    assert analyst["tables"] == [lake.sales]
    shoal_rows = sorted(list(r) for r in spark.table(lake.sales).collect())
    assert analyst[lake.sales] == json.loads(json.dumps(shoal_rows))
    assert "error" in analyst[lake.hr] and "CANARY" not in json.dumps(analyst)

    assert cols["tables"] == [lake.opps]  # listed (it may read part of it) ...
    assert "PostgreSQL endpoint" in cols[lake.opps]["error"]  # ... but refused whole
