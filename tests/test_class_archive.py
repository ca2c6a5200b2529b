"""The JVM class archive (shoal/class_archive.py): built by setup, mapped by every cold Spark start
whose Java and jars it matches, and never a cause of failure or of noise on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shoal import class_archive
from shoal.config import load_settings


def test_options_name_the_archive_only_when_it_exists_and_can_match(tmp_path: Path, monkeypatch) -> None:
    archive = tmp_path / "spark.jsa"
    s = load_settings(workspace=tmp_path / "ws", spark={"class_archive": str(archive)})
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    assert class_archive.java_options(s) == ""  # not built: nothing changes
    archive.write_bytes(b"x")
    opts = class_archive.java_options(s)
    assert f"-XX:SharedArchiveFile={archive}" in opts and "-Xlog:cds=off" in opts  # no stdout noise
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))  # a folder on the classpath: the JVM would refuse it
    assert class_archive.java_options(s) == ""
    monkeypatch.delenv("SPARK_CONF_DIR")
    off = load_settings(workspace=tmp_path / "ws", spark={"class_archive": "off"})
    assert class_archive.java_options(off) == "" and class_archive.archive_path(off) is None


def test_the_automatic_archive_is_keyed_by_java_and_the_jvm_class_path(tmp_path: Path) -> None:
    s = load_settings(workspace=tmp_path / "ws")
    auto = class_archive.archive_path(s)
    assert auto is not None and auto.parent == Path.home() / ".cache" / "shoal" / "jvm"
    # spark.jars (the PostgreSQL driver, the S3 client) are loaded by Spark's own class loader,
    # which a dynamic archive does not hold: a server configuration shares the embedded one's.
    server = load_settings(
        workspace=tmp_path / "ws",
        warehouse="s3://lake/warehouse",
        catalog={"type": "postgresql", "uri": "jdbc:postgresql://127.0.0.1:5432/lake"},
        storage={"endpoint": "http://127.0.0.1:8333"},
    )
    assert class_archive.archive_path(server) == auto
    extra = tmp_path / "other.jar"
    extra.write_bytes(b"PK")
    on_classpath = load_settings(workspace=tmp_path / "ws", spark={"conf": {"spark.driver.extraClassPath": str(extra)}})
    assert class_archive.archive_path(on_classpath) != auto  # the JVM's own class path: another archive
    assert class_archive.archive_path(s) == auto  # stable


def test_the_session_jvm_maps_the_archive_setup_built(spark, settings) -> None:
    """scripts/setup.sh builds the archive (`shoal engine archive`); the test session's JVM, started
    by get_spark like any command's, has it mapped into memory."""
    if os.environ.get("SPARK_CONF_DIR"):
        pytest.fail("SPARK_CONF_DIR is set: the archive cannot match; run the suite through scripts/test.sh")
    path = class_archive.archive_path(settings)
    assert path is not None and path.is_file(), "no class archive: run scripts/setup.sh or `shoal engine archive`"
    pid = spark.sparkContext._gateway.proc.pid  # spark-submit execs the JVM in the same process
    maps = Path(f"/proc/{pid}/maps").read_text()
    assert str(path) in maps


def test_a_command_with_the_archive_prints_clean_json(tmp_path: Path, settings) -> None:
    """The archive changes start-up only: the output of a command is the same bytes."""
    path = class_archive.archive_path(settings)
    assert path is not None and path.is_file()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env |= {"SHOAL_WORKSPACE": str(tmp_path / "ws"), "SHOAL_ENGINE": "off"}
    done = subprocess.run(
        [sys.executable, "-m", "shoal.cli.console", "sql", "SELECT 1 AS x", "--format", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [{"x": 1}]  # nothing but the result on stdout
