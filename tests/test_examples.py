"""Every file under examples/ works as its README says (run on a copy, so the repository stays clean)."""

from __future__ import annotations

import csv
import shutil
import uuid
from pathlib import Path

import pytest
import yaml

from shoal import workflows
from shoal.config import load_settings

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _oracle(changes: Path) -> dict[int, dict[str, str]]:
    """The orders table the change files describe: last change per key wins, D removes it."""
    rows: dict[int, dict[str, str]] = {}
    events = []
    for f in sorted(changes.glob("*.csv")):
        with open(f, newline="") as fh:
            events += list(csv.DictReader(fh))
    for e in sorted(events, key=lambda e: e["updated_at"]):
        key = int(e["order_id"])
        if e["op"] == "D":
            rows.pop(key, None)
        else:
            rows[key] = e
    return rows


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("examples") / "examples"
    shutil.copytree(EXAMPLES, target)
    return target


def test_example_config_loads(copy: Path) -> None:
    s = load_settings(copy / "shoal.toml")
    assert s.workspace_dir == copy / "lake-workspace"
    assert s.cdc.on_error == "quarantine" and s.workflows.failure_topic == "ops"


def test_example_workflow_quality_and_dashboard(spark, settings, copy: Path) -> None:
    from shoal.quality import load_ruleset
    from shoal.web.console.dashboards import load_file

    spark.sql("DROP TABLE IF EXISTS shop.orders")
    spark.sql("DROP TABLE IF EXISTS shop.orders_by_region")
    ruleset = load_ruleset(copy / "quality" / "orders.yaml")
    assert ruleset.table == "shop.orders"
    record = workflows.run(settings, str(copy / "workflows" / "orders-refresh.asl.json"), {})
    assert record.status == "SUCCEEDED", (record.error, record.cause)
    assert (
        record.output["applied"] == {"inserted": 5, "updated": 2, "deleted": 1}
        or record.output["applied"]["inserted"] >= 4
    )
    assert record.output["quality"]["status"] in ("PASSED", "WARNED")
    expected = _oracle(copy / "changes")
    got = {r.order_id: r for r in spark.sql("SELECT * FROM shop.orders").collect()}
    assert set(got) == set(expected)
    for key, e in expected.items():
        assert got[key].status == e["status"] and float(got[key].amount) == pytest.approx(float(e["amount"]))
    summary = {
        r.region: (r.orders, float(r.amount)) for r in spark.sql("SELECT * FROM shop.orders_by_region").collect()
    }
    want: dict[str, tuple[int, float]] = {}
    for e in expected.values():
        n, a = want.get(e["region"], (0, 0.0))
        want[e["region"]] = (n + 1, a + float(e["amount"]))
    assert summary.keys() == want.keys()
    for region, (n, a) in want.items():
        assert summary[region][0] == n and summary[region][1] == pytest.approx(a)
    # The dashboard validates and each of its datasets runs over the workflow's output.
    board = load_file(copy / "dashboards" / "orders.yaml")
    for sql in board.datasets.values():
        assert spark.sql(sql).count() == len(want)


def test_example_recipe_job(spark, settings, copy: Path) -> None:
    from shoal.recipes import load_job_file, run_job

    job = load_job_file(copy / "recipes" / "orders-clean.job.yaml")
    job.name = f"orders-clean-{uuid.uuid4().hex[:6]}"
    run_job(spark, settings, job)
    out = spark.read.parquet(str(copy / "out" / "orders-clean"))
    rows = {r.order_id: r for r in out.collect()}
    with open(copy / "changes" / "orders_0002.csv", newline="") as fh:
        source = list(csv.DictReader(fh))
    kept = [r for r in source if r["status"] != "refunded"]  # the recipe's conditional REMOVE_VALUES
    assert sorted(rows) == sorted(int(r["order_id"]) for r in kept)
    for r in kept:
        row = rows[int(r["order_id"])]
        assert row.region == r["region"].upper() and "amount_eur" in out.columns and "amount" not in out.columns


def test_examples_readme_lists_every_file() -> None:
    readme = (EXAMPLES / "README.md").read_text()
    for f in EXAMPLES.rglob("*"):
        if f.is_file() and f.name != "README.md" and f.parent.name != "changes":
            assert f.name in readme, f"examples/README.md does not mention {f.name}"
    assert yaml.safe_load((EXAMPLES / "quality" / "orders.yaml").read_text())["name"] == "example-orders"
