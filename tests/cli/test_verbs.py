"""Verbs from issue 31: `shoal table list|describe|schema|properties|drop` (governed with --as),
`group list|delete`, `tag delete`, `job delete`, `workflow delete`, and `shoal model` as the one
name for models (`shoal models` a hidden alias). Few tests, one shared workspace."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from tests.support.helpers import run_cli


def test_table_verbs_operator_and_governed(spark, settings, cli_env, capsys, monkeypatch) -> None:
    from shoal.governance import Governance, Principals

    ns = f"v{uuid.uuid4().hex[:8]}"
    cat = settings.catalog.name
    spark.sql(
        f"CREATE TABLE {cat}.{ns}.items (id BIGINT, name STRING, secret STRING) USING iceberg PARTITIONED BY (name)"
    )
    spark.sql(f"INSERT INTO {cat}.{ns}.items VALUES (1, 'a', 'x')")
    spark.sql(f"ALTER TABLE {cat}.{ns}.items SET TBLPROPERTIES ('team' = 'shop')")
    # A storage path under a key that does not say so (as `table maintain` records the CDC ledger).
    ledger = "file:///lake/_shoal/cdc-ledgers/items/ledger-1.json"
    spark.sql(f"ALTER TABLE {cat}.{ns}.items SET TBLPROPERTIES ('shoal.state.cdc-ledger' = '{ledger}')")
    spark.sql(f"CREATE TABLE {cat}.{ns}.other (id BIGINT) USING iceberg")

    def cli(*args: str) -> tuple[int, str, str]:
        return run_cli(list(args), capsys, monkeypatch)

    code, out, err = cli("table", "list", ns, "--json")
    assert code == 0, err
    assert json.loads(out) == [
        {"namespace": ns, "table": "items", "name": f"{ns}.items"},
        {"namespace": ns, "table": "other", "name": f"{ns}.other"},
    ]
    code, out, _ = cli("table", "list", "--json")
    assert f"{ns}.items" in [t["name"] for t in json.loads(out)]

    code, out, _ = cli("table", "schema", f"{ns}.items", "--json")
    assert code == 0
    assert [(c["name"], c["type"]) for c in json.loads(out)] == [
        ("id", "bigint"),
        ("name", "string"),
        ("secret", "string"),
    ]

    code, out, _ = cli("table", "properties", f"{ns}.items", "--json")
    props = json.loads(out)
    assert props["team"] == "shop" and props["format-version"] in ("1", "2", "3")
    assert props["shoal.state.cdc-ledger"] == ledger  # the operator's view keeps it

    code, out, _ = cli("table", "describe", f"{ns}.items", "--json")
    described = json.loads(out)
    assert described["partitioning"] == ["name"] and described["snapshots"] == 1
    assert described["location"].endswith(f"{ns}/items") or f"{ns}" in described["location"]
    assert described["current_snapshot_id"] and described["schema"][0]["name"] == "id"
    code, out, _ = cli("table", "describe", f"{ns}.items")
    assert code == 0 and "Schema of" in out and "team" in out

    # Governed: a user with no grant does not discover the table ([governance] tables_visible_to_all
    # is off by default); with SELECT it does, never sees storage paths, and may not drop.
    user = f"u{uuid.uuid4().hex[:8]}"
    Principals(settings).add(user)
    code, out, _ = cli("table", "describe", f"{ns}.items", "--as", user, "--json")
    assert code == 4 and "not discoverable" in json.loads(out)["error"]
    code, out, _ = cli("table", "list", ns, "--as", user, "--json")
    assert code == 0 and json.loads(out) == []
    Governance(settings).grant(Principals(settings).principal("admin"), "SELECT", "TABLE", f"{ns}.items", user)
    code, out, _ = cli("table", "describe", f"{ns}.items", "--as", user, "--json")
    assert code == 0
    seen = json.loads(out)
    assert "location" not in seen and seen["properties"]["team"] == "shop"
    assert not [k for k in seen["properties"] if "path" in k or "location" in k]
    assert "shoal.state.cdc-ledger" not in seen["properties"]  # a path by its value
    code, out, err = cli("table", "drop", f"{ns}.items", "--as", user, "--json")
    assert code == 4 and "DROP" in json.loads(out)["error"]  # AccessDenied's exit code
    assert spark.catalog.tableExists(f"{cat}.{ns}.items")
    code, _, err = cli("table", "schema", f"{ns}.items", "--as", "nobody-here")
    assert code == 1 and "nobody-here" in err

    code, out, _ = cli("table", "drop", f"{ns}.other", "--json")
    assert code == 0 and json.loads(out)["ok"] is True
    code, out, _ = cli("table", "list", ns, "--json")
    assert [t["table"] for t in json.loads(out)] == ["items"]
    code, _, err = cli("table", "schema", f"{ns}.other")
    assert code == 1 and "other" in err


def test_group_tag_job_workflow_delete_and_model_names(settings, cli_env, tmp_path: Path, capsys, monkeypatch) -> None:
    from shoal.governance import Governance, Principals

    def cli(*args: str) -> tuple[int, str, str]:
        return run_cli(list(args), capsys, monkeypatch)

    tag = f"g{uuid.uuid4().hex[:8]}"
    group, user = f"{tag}_team", f"{tag}_user"
    people = Principals(settings)
    people.add(group, kind="group")
    people.add(user)
    people.add_member(group, user)
    code, out, _ = cli("group", "list", "--json")
    assert code == 0 and {"name": group, "members": [user]} in json.loads(out)
    code, _, err = cli("group", "delete", user)
    assert code == 1 and "is a user" in err
    code, out, _ = cli("group", "delete", group, "--json")
    assert code == 0 and json.loads(out)["ok"] is True
    code, out, _ = cli("group", "list", "--json")
    assert group not in [g["name"] for g in json.loads(out)]
    assert people.principal(user).groups == frozenset()

    gov = Governance(settings)
    gov.create_tag(tag, ["public", "secret"])
    gov.assign_tag(tag, "public", database_name="somedb")
    grant = gov.grant(people.principal("admin"), "SELECT", "TAGS", f"{tag}=public", user)
    code, out, err = cli("tag", "delete", tag, "--json")
    assert code == 1 and f"grant(s) {grant.id} are on tag" in json.loads(out)["error"]
    gov.revoke(people.principal("admin"), grant.id)
    code, out, _ = cli("tag", "delete", tag, "--json")
    assert code == 0 and json.loads(out)["assignments_removed"] == 1
    assert tag not in gov.tags()
    code, _, err = cli("tag", "delete", tag)
    assert code == 1 and "no tag key" in err

    # Jobs and workflows: register, delete, and a schedule keeps its workflow.
    recipe = tmp_path / "r.json"
    recipe.write_text(json.dumps([{"Action": {"Operation": "UPPER_CASE", "Parameters": {"sourceColumn": "a"}}}]))
    job = tmp_path / "j.job.yaml"
    job.write_text(
        f"name: {tag}-job\ntype: recipe\ninput:\n  path: in.csv\n  format: csv\nrecipe: r.json\n"
        "outputs:\n  - path: out\n    format: parquet\n"
    )
    code, _, err = cli("job", "register", str(job))
    assert code == 0, err
    code, out, _ = cli("job", "delete", f"{tag}-job", "--json")
    assert code == 0 and json.loads(out)["ok"] is True
    code, out, _ = cli("job", "list", "--json")
    assert f"{tag}-job" not in [j["name"] for j in json.loads(out)]
    code, _, err = cli("job", "delete", f"{tag}-job")
    assert code == 1 and "no job named" in err

    machine = tmp_path / f"{tag}.asl.json"
    machine.write_text(json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}))
    assert cli("workflow", "register", str(machine))[0] == 0
    assert cli("schedule", "create", f"{tag}-daily", "--workflow", tag, "--cron", "0 5 * * *")[0] == 0
    code, _, err = cli("workflow", "delete", tag)
    assert code == 1 and f"{tag}-daily" in err
    assert cli("schedule", "delete", f"{tag}-daily")[0] == 0
    code, out, _ = cli("workflow", "delete", tag, "--json")
    assert code == 0 and json.loads(out)["ok"] is True
    code, out, _ = cli("workflow", "list", "--json")
    assert tag not in [w["name"] for w in json.loads(out)]

    # `shoal model` is the one name; `shoal models` still works, hidden from help.
    code, out, _ = cli("--help")
    assert " model " in out and " models " not in out
    code, out, _ = cli("model", "wheels", "--json")
    code_old, out_old, _ = cli("models", "list", "--json")
    assert code == code_old == 0 and json.loads(out) == json.loads(out_old) and json.loads(out)["wheels"]
