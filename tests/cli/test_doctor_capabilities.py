"""`shoal doctor` checks the optional capabilities (web, the PostgreSQL endpoint, models, llm, ...)
and says exactly which module is missing and which extra brings it, instead of "everything is here".

A missing package is made the way Python itself blocks an import: `sys.modules[name] = None`
(find_spec then answers None, and `import name` fails)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.support.helpers import run_cli


def test_doctor_names_missing_capabilities(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SHOAL_CONFIG", raising=False)
    code, out, _ = run_cli(["doctor", "--json"], capsys, monkeypatch)
    by_name = {c["name"]: c for c in json.loads(out)["checks"]}
    # scripts/setup.sh installs every extra: the test machine has them all.
    for name in ("web", "postgres endpoint", "custom models", "llm", "search", "documents", "media"):
        assert by_name[name]["status"] == "ok", by_name[name]

    for module in ("uvicorn", "cryptography", "skops", "jinja2", "psycopg"):
        monkeypatch.setitem(sys.modules, module, None)
    code, out, _ = run_cli(["doctor", "--json"], capsys, monkeypatch)
    by_name = {c["name"]: c for c in json.loads(out)["checks"]}
    web = by_name["web"]
    assert web["status"] == "warn" and "uvicorn" in web["detail"] and "jinja2" in web["detail"]
    assert web["hint"] == "pip install 'shoal[web]'"
    assert "cryptography" in by_name["postgres endpoint"]["detail"]
    assert "shoal serve --pg" in by_name["postgres endpoint"]["needed_for"]
    assert (
        by_name["custom models"]["hint"] == "pip install 'shoal[models]'"
        and "skops" in by_name["custom models"]["detail"]
    )
    assert by_name["llm"]["status"] == "warn" and by_name["llm"]["hint"] == "pip install 'shoal[llm]'"
    # Optional parts missing do not fail the machine: the core still works.
    assert by_name["postgres catalog"]["status"] == "warn"

    # ... and the human report names them instead of "everything Shoal needs is here".
    code, out, _ = run_cli(["doctor"], capsys, monkeypatch)
    text = " ".join(out.split())
    assert code == 0 and "everything" not in text  # the test machine has every required part
    assert "the core is ready" in text and "web (pip install 'shoal[web]')" in text

    # A capability the configuration relies on is a failure: a PostgreSQL catalog without psycopg.
    monkeypatch.setenv("SHOAL_CATALOG__TYPE", "postgresql")
    monkeypatch.setenv("SHOAL_CATALOG__URI", "jdbc:postgresql://127.0.0.1:1/none")
    code, out, _ = run_cli(["doctor", "--json"], capsys, monkeypatch)
    report = json.loads(out)
    by_name = {c["name"]: c for c in report["checks"]}
    assert by_name["postgres catalog"]["status"] == "fail" and code == 1 and report["ok"] is False
    assert "configuration uses it" in by_name["postgres catalog"]["detail"]


def test_doctor_checks_a_configured_spark_master(tmp_path: Path) -> None:
    """A spark:// master that does not answer is a failure naming it (a local master is not checked);
    the cluster tests check the answering one."""
    from shoal.config import load_settings
    from shoal.doctor import _spark_master
    from tests.support.servers import free_port

    assert _spark_master(load_settings(workspace=tmp_path)) is None
    port = free_port()
    check = _spark_master(load_settings(workspace=tmp_path, spark={"master": f"spark://127.0.0.1:{port}"}))
    assert check is not None and check.status == "fail" and f"127.0.0.1:{port} does not answer" in check.detail
    assert check.hint and "shoal cluster up" in check.hint
