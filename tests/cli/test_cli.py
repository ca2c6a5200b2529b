"""The `shoal` command: contracts from the issue (flags, --json shapes, exit codes)."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

import pytest

from tests.support.helpers import run_cli, shoal_process, write_csv

T1, T2 = "2022-03-01 10:00:00", "2022-03-02 11:34:01"


def test_cdc_apply_json_sql_formats_and_history(spark, cli_env, source, table_name, capsys, monkeypatch) -> None:
    write_csv(source, "LOAD00000001.csv", [[None, 101, "tools", "hammer", 10, T1], [None, 102, "tools", "saw", 5, T1]])
    args = [
        "cdc",
        "apply",
        str(source),
        "--table",
        table_name,
        "--key",
        "product_id",
        "--sequence",
        "updated_at",
        "--partition-by",
        "category, bucket(16, product_id)",
        "--json",
    ]
    code, out, _ = run_cli(args, capsys, monkeypatch)
    assert code == 0
    result = json.loads(out)
    for key in (
        "files_applied",
        "rows_read",
        "inserted",
        "updated",
        "deleted",
        "ignored_stale",
        "rejected",
        "snapshot_id",
        "seconds",
    ):
        assert key in result
    assert result["files_applied"] == ["LOAD00000001.csv"] and result["inserted"] == 2

    code, out, _ = run_cli(
        ["sql", f"SELECT * FROM {table_name} ORDER BY product_id", "--format", "json"], capsys, monkeypatch
    )
    assert code == 0
    assert json.loads(out)[0] == {
        "product_id": 101,
        "category": "tools",
        "name": "hammer",
        "quantity": 10,
        "updated_at": "2022-03-01T10:00:00+00:00",
    }
    code, out, _ = run_cli(
        ["sql", f"SELECT product_id, name FROM {table_name} ORDER BY 1", "--format", "csv"], capsys, monkeypatch
    )
    assert out.splitlines() == ["product_id,name", "101,hammer", "102,saw"]
    snap = result["snapshot_id"]
    code, out, _ = run_cli(
        ["sql", f"SELECT count(*) AS n FROM {table_name} FOR VERSION AS OF {snap}", "-f", "json"], capsys, monkeypatch
    )
    assert json.loads(out) == [{"n": 2}]

    code, out, _ = run_cli(["table", "history", table_name, "--json"], capsys, monkeypatch)
    hist = json.loads(out)
    assert [h["snapshot_id"] for h in hist] == [snap] and hist[0]["files"] == ["LOAD00000001.csv"]
    assert {"committed_at", "operation"} <= set(hist[0])

    write_csv(source, "20220302-1134010000.csv", [["U", 101, "tools", "hammer", 9, T2]])
    code, out, _ = run_cli(["cdc", "files", table_name, "--source", str(source), "--json"], capsys, monkeypatch)
    status = json.loads(out)
    assert [f["file"] for f in status["applied"]] == ["LOAD00000001.csv"]
    assert status["applied"][0]["size"] > 0 and status["pending"] == ["20220302-1134010000.csv"]

    code, out, _ = run_cli(["table", "maintain", table_name, "--json"], capsys, monkeypatch)
    assert code == 0
    done = json.loads(out)
    assert done["table"] == table_name and done["cdc_ledgers_removed"] == 0 and done["snapshot_id"]
    code, _, err = run_cli(["table", "maintain", table_name, "--orphan-min-age-hours", "1"], capsys, monkeypatch)
    assert code == 1 and "at least 24 hours" in err


def test_cdc_apply_reports_a_rewritten_file_and_reapply_takes_it(
    spark, cli_env, source, table_name, capsys, monkeypatch
) -> None:
    write_csv(source, "LOAD00000001.csv", [[None, 101, "tools", "hammer", 10, T1]])
    args = ["cdc", "apply", str(source), "--table", table_name, "--key", "product_id", "--sequence", "updated_at"]
    assert run_cli(args, capsys, monkeypatch)[0] == 0
    write_csv(source, "LOAD00000001.csv", [[None, 101, "tools", "hammer", 11, T1], [None, 102, "tools", "saw", 1, T1]])
    code, out, err = run_cli(args, capsys, monkeypatch)
    said = " ".join((out + err).split())
    assert code == 0 and "LOAD00000001.csv was rewritten after it was applied" in said and "--reapply" in said
    code, out, _ = run_cli([*args, "--json"], capsys, monkeypatch)
    result = json.loads(out)
    assert result["files_applied"] == [] and result["files_rewritten"] == ["LOAD00000001.csv"]
    assert any("LOAD00000001.csv was rewritten" in w for w in result["warnings"])
    code, out, _ = run_cli([*args, "--reapply", "--json"], capsys, monkeypatch)
    result = json.loads(out)
    assert result["files_applied"] == result["files_reapplied"] == ["LOAD00000001.csv"]
    assert (result["inserted"], result["updated"]) == (1, 1)


def test_errors_exit_nonzero_with_file_and_line(spark, cli_env, source, table_name, capsys, monkeypatch) -> None:
    write_csv(source, "20220302-1134010000.csv", [["U", 1, "a", "b", 1, T2], ["Z", 2, "a", "b", 1, T2]])
    args = ["cdc", "apply", str(source), "--table", table_name, "--key", "product_id", "--sequence", "updated_at"]
    code, _, err = run_cli(args, capsys, monkeypatch)
    assert code == 1
    assert "20220302-1134010000.csv:3: unknown operation 'Z'" in err and "--on-error quarantine" in err
    code, out, _ = run_cli([*args, "--json"], capsys, monkeypatch)
    assert code == 1 and "20220302-1134010000.csv:3" in json.loads(out)["error"]
    code, _, err = run_cli(["sql", "SELECT * FROM nope.nothing"], capsys, monkeypatch)
    assert code == 1 and "TABLE_OR_VIEW_NOT_FOUND" in err
    code, _, err = run_cli(["table", "history", "nope.nothing"], capsys, monkeypatch)
    assert code == 1 and "does not exist" in err


def test_cdc_settings_decide_what_the_flags_leave_open(
    spark, settings, cli_env, source, table_name, tmp_path, capsys, monkeypatch
) -> None:
    """`[cdc] on_error` in shoal.toml changes what `shoal cdc apply` does; a flag still wins."""
    write_csv(source, "20220302-1134010000.csv", [["U", 1, "a", "b", 1, T2], ["Z", 2, "a", "b", 1, T2]])
    config = tmp_path / "shoal.toml"
    config.write_text(f'workspace = "{settings.workspace_dir}"\n[cdc]\non_error = "quarantine"\n')
    monkeypatch.delenv("SHOAL_WORKSPACE", raising=False)
    args = ["cdc", "apply", str(source), "--table", table_name, "--key", "product_id", "--sequence", "updated_at"]
    code, out, err = run_cli(["--config", str(config), *args, "--on-error", "fail", "--json"], capsys, monkeypatch)
    assert code == 1 and "unknown operation 'Z'" in json.loads(out)["error"]
    code, out, err = run_cli(["--config", str(config), *args, "--json"], capsys, monkeypatch)
    assert code == 0, err
    result = json.loads(out)
    assert (result["inserted"], result["rejected"]) == (1, 1)


def test_library_errors_come_out_in_flag_words(spark, cli_env, source, table_name, capsys, monkeypatch) -> None:
    """The library names its options (`keys`); the CLI says them as its flags (`--key`)."""
    write_csv(source, "LOAD00000001.csv", [[None, 1, "a", "b", 1, T1]])
    args = ["cdc", "apply", str(source), "--table", table_name, "--key", "sku", "--sequence", "updated_at"]
    code, _, err = run_cli(args, capsys, monkeypatch)
    assert code == 1 and "--key column 'sku' is not in the change files" in err
    code, _, err = run_cli([*args[:-4], "--key", " ", "--sequence", "updated_at"], capsys, monkeypatch)
    assert code == 1 and "give --key COL[,COL...]" in err, err


@pytest.mark.slow
def test_process_killed_at_random_moments_then_rerun_is_exactly_once(tmp_path: Path) -> None:
    """SIGKILL a real `shoal cdc apply` mid-flight, several times, then let it finish."""
    source = tmp_path / "src"
    source.mkdir()
    n = 3000
    write_csv(source, "LOAD00000001.csv", [[None, i, f"c{i % 5}", f"item{i}", i, T1] for i in range(n)])
    write_csv(
        source,
        "20220302-1134010000.csv",
        [["U", i, f"c{(i + 1) % 5}", f"item{i}", i * 10, T2] for i in range(0, n, 2)]
        + [["D", i, "x", "x", 0, T2] for i in range(1, n, 3)],
    )
    expected = {}
    for i in range(n):
        if i % 3 == 1:
            continue  # the delete comes after the update at the same sequence: it wins
        expected[i] = i * 10 if i % 2 == 0 else i
    env = {**os.environ, "SHOAL_WORKSPACE": str(tmp_path / "ws")}
    args = [
        "cdc",
        "apply",
        str(source),
        "--table",
        "inv.products",
        "--key",
        "product_id",
        "--sequence",
        "updated_at",
        "--partition-by",
        "category",
        "--json",
    ]
    rng = random.Random(7)
    for _ in range(3):
        proc = shoal_process(args, env, start_new_session=True)
        time.sleep(rng.uniform(4, 14))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    for _ in range(2):  # the load and the change file may both still be pending
        proc = shoal_process(args, env)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    # Read on a machine set to another time zone: timestamps still come out as stored (UTC).
    query = "SELECT product_id, quantity, updated_at FROM inv.products"
    proc = shoal_process(["sql", query, "--format", "json"], {**env, "TZ": "America/New_York"})
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    rows = json.loads(out)
    assert {r["product_id"]: r["quantity"] for r in rows} == expected
    stamps = {T1.replace(" ", "T") + "+00:00", T2.replace(" ", "T") + "+00:00"}
    assert {r["updated_at"] for r in rows} == stamps
    proc = shoal_process(["table", "history", "inv.products", "--json"], env)
    out, _ = proc.communicate(timeout=300)
    applied = [f for h in json.loads(out) for f in h["files"]]
    assert sorted(applied) == ["20220302-1134010000.csv", "LOAD00000001.csv"]  # each exactly once
