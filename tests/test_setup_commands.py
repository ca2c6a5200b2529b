"""`shoal config init`, unknown-key errors and `shoal doctor` (no SparkSession needed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import run_cli

from shoal.config import load_settings
from shoal.exceptions import ConfigError

_KEY_LINE = re.compile(r"^# (\w+) = (.*)$")


def _uncomment_defaults(text: str) -> str:
    """Turn every commented `key = default` line into a live one (not the unset examples)."""
    lines = []
    for line in text.splitlines():
        m = _KEY_LINE.match(line)
        if m and "(not set by default)" not in line:
            lines.append(f"{m.group(1)} = {m.group(2)}")
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


def test_config_init_writes_every_key_and_its_defaults_load_back(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SHOAL_CONFIG", raising=False)
    code, out, err = run_cli(["config", "init", "--json"], capsys, monkeypatch)
    assert code == 0, err
    written = Path(json.loads(out)["written"])
    assert written == tmp_path / "shoal.toml"
    text = written.read_text()
    # Sections appear as headers; the commented-out file means "all defaults".
    for header in ("[catalog]", "[spark]", "[cdc]", "[extract.media]", "[notify.smtp]", "[server]"):
        assert header in text
    assert load_settings(written).model_dump() == load_settings().model_dump()
    # Uncommenting every default gives the same settings: the template's values are real defaults.
    live = tmp_path / "live" / "shoal.toml"
    live.parent.mkdir()
    live.write_text(_uncomment_defaults(text))
    loaded = load_settings(live).model_dump()
    expected = load_settings(written).model_dump()
    # Paths are anchored to each file's folder; compare everything else exactly.
    for d in (loaded, expected):
        d.pop("workspace")
    assert loaded == expected
    assert sum(1 for line in live.read_text().splitlines() if _KEY_LINE.match("# " + line)) > 60
    # The comments beside fields come along (a sample of them).
    assert "merge-on-read measured" in text
    assert "Pillow refuses larger images" in text


def test_config_init_refuses_to_overwrite(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "shoal.toml").write_text("workspace = 'mine'\n")
    code, out, err = run_cli(["config", "init"], capsys, monkeypatch)
    assert code == 1
    assert "already exists" in err and "--force" in err
    assert (tmp_path / "shoal.toml").read_text() == "workspace = 'mine'\n"
    code, out, err = run_cli(["config", "init", "--force"], capsys, monkeypatch)
    assert code == 0, err
    assert "[catalog]" in (tmp_path / "shoal.toml").read_text()


@pytest.mark.parametrize(
    ("toml", "path", "suggestion"),
    [
        ('[spark]\nmastr = "local[1]"\n', "spark.mastr", "master"),
        ("[extract.media]\nspeech_modle = 'base'\n", "extract.media.speech_modle", "speech_model"),
        ("[notify.smtp]\nhots = 'mail'\n", "notify.smtp.hots", "host"),
        ("workspce = 'x'\n", "workspce", "workspace"),
        ("[llm.endpoints.local]\nbase_url = 'http://x/v1'\nmodle = 'q'\n", "llm.endpoints.local.modle", "model"),
    ],
)
def test_unknown_keys_name_their_path_and_the_nearest_valid_name(
    tmp_path: Path, toml: str, path: str, suggestion: str
) -> None:
    f = tmp_path / "shoal.toml"
    f.write_text(toml)
    with pytest.raises(ConfigError) as caught:
        load_settings(f)
    message = str(caught.value)
    assert f"{path}: unknown key" in message
    assert f"did you mean {suggestion!r}" in message
    assert str(f) in message


def test_unknown_key_from_the_environment_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SHOAL_CDC__ON_EROR", "quarantine")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "cdc.on_eror: unknown key" in str(caught.value)
    assert "did you mean 'on_error'" in str(caught.value)


def test_doctor_reports_this_machine(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SHOAL_CONFIG", raising=False)
    code, out, err = run_cli(["doctor", "--json"], capsys, monkeypatch)
    report = json.loads(out)
    by_name = {c["name"]: c for c in report["checks"]}
    # scripts/setup.sh installs all of these; the test suite's machine must pass them.
    for name in ("java", "iceberg jar", "catalog jdbc jar", "catalog database", "tesseract", "ffmpeg", "graphviz"):
        assert by_name[name]["status"] == "ok", by_name[name]
    for name in ("embedding model", "speech model", "image label model", "face model", "unsafe-content model"):
        assert by_name[name]["status"] == "ok", by_name[name]
    assert report["ok"] is (code == 0)


def test_doctor_names_the_missing_part_and_how_to_install_it(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SHOAL_CATALOG__JDBC_JAR", str(tmp_path / "missing.jar"))
    monkeypatch.setenv("SHOAL_SEARCH__MODEL", str(tmp_path / "no-model"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no tesseract, ffmpeg, dot or java here
    monkeypatch.delenv("JAVA_HOME", raising=False)
    code, out, err = run_cli(["doctor", "--json"], capsys, monkeypatch)
    assert code == 1
    report = json.loads(out)
    assert report["ok"] is False
    by_name = {c["name"]: c for c in report["checks"]}
    assert by_name["catalog jdbc jar"]["status"] == "fail"
    assert "libxerial-sqlite-jdbc-java" in by_name["catalog jdbc jar"]["hint"]
    assert by_name["tesseract"]["status"] == "fail" and "tesseract-ocr" in by_name["tesseract"]["hint"]
    assert by_name["java"]["status"] == "fail" and "openjdk" in by_name["java"]["hint"]
    assert by_name["embedding model"]["status"] == "fail"
    # The human rendering says the same and exits 1.
    code, out, err = run_cli(["doctor"], capsys, monkeypatch)
    assert code == 1
    assert "FAIL" in out and "apt-get install -y tesseract-ocr" in out
