from __future__ import annotations

from pathlib import Path

import pytest

from shoal.config import load_settings
from shoal.exceptions import ConfigError
from shoal.spark import catalog_conf


def test_defaults_live_in_the_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    s = load_settings()
    assert s.workspace_dir == tmp_path / ".shoal"
    assert s.warehouse_uri == str(tmp_path / ".shoal" / "warehouse")
    assert s.catalog_jdbc_uri == f"jdbc:sqlite:{tmp_path / '.shoal' / 'catalog.db'}"
    assert s.spark.master.startswith("local")


def test_toml_then_environment_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "shoal.toml").write_text(
        'workspace = "lake"\n[spark]\nmaster = "spark://example:7077"\n[cdc]\nwrite_mode = "copy-on-write"\n'
    )
    s = load_settings()
    assert s.workspace_dir == tmp_path / "lake"
    assert s.spark.master == "spark://example:7077"
    assert s.cdc.write_mode == "copy-on-write"
    monkeypatch.setenv("SHOAL_SPARK__MASTER", "local[1]")
    assert load_settings().spark.master == "local[1]"


def test_postgres_catalog_and_secret_handling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SHOAL_CATALOG__TYPE", "postgresql")
    monkeypatch.setenv("SHOAL_CATALOG__URI", "jdbc:postgresql://127.0.0.1:5432/lake")
    monkeypatch.setenv("SHOAL_CATALOG__USER", "shoal")
    monkeypatch.setenv("SHOAL_CATALOG__PASSWORD", "s3cret")
    s = load_settings()
    assert "s3cret" not in repr(s)
    assert s.catalog_sqlalchemy_uri == "postgresql+psycopg://shoal:s3cret@127.0.0.1:5432/lake"
    conf = catalog_conf(s)
    assert conf["spark.sql.catalog.lake.jdbc.password"] == "s3cret"
    assert "spark.sql.catalog.lake.jdbc.journal_mode" not in conf


def test_postgres_without_uri_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SHOAL_CATALOG__TYPE", "postgresql")
    with pytest.raises(ConfigError, match="catalog.uri is required"):
        _ = load_settings().catalog_jdbc_uri


def test_invalid_settings_name_the_file(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[spark]\nshuffle_partitions = "many"\n')
    with pytest.raises(ConfigError, match="bad.toml"):
        load_settings(cfg)
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "missing.toml")


def test_catalog_cannot_be_named_shoal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SHOAL_CATALOG__NAME", "shoal")
    with pytest.raises(ConfigError):
        load_settings()
