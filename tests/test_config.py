from __future__ import annotations

from pathlib import Path

import pytest

from shoal.config import load_settings
from shoal.exceptions import ConfigError
from shoal.spark import catalog_conf, spark_conf


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


def test_object_store_settings_reach_iceberg_s3a_and_python_workers(tmp_path, monkeypatch):
    from shoal import storage
    from shoal.spark import s3_jars, spark_conf

    for var in storage.S3_ENV.values():  # set then delete: monkeypatch restores what configure() exports
        monkeypatch.setenv(var, "x")
        monkeypatch.delenv(var)
    s = load_settings(
        workspace=tmp_path,
        warehouse="s3://lake/warehouse",
        storage={"endpoint": "http://127.0.0.1:9000", "access_key": "AK", "secret_key": "SK"},
    )
    conf = spark_conf(s)
    assert conf["spark.sql.catalog.lake.io-impl"] == "org.apache.iceberg.aws.s3.S3FileIO"
    assert conf["spark.sql.catalog.lake.warehouse"] == "s3://lake/warehouse"
    assert conf["spark.sql.catalog.lake.s3.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.sql.catalog.lake.s3.path-style-access"] == "true"
    assert conf["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.executorEnv.SHOAL_STORAGE__ENDPOINT"] == "http://127.0.0.1:9000"
    jars = conf["spark.jars"].split(",")
    assert set(s3_jars()) <= set(jars) and any("/s3-2." in j for j in jars) and any("hadoop-aws" in j for j in jars)
    # Local warehouses carry none of it (no extra jars on the class path).
    for var in storage.S3_ENV.values():
        monkeypatch.delenv(var, raising=False)
    local = spark_conf(load_settings(workspace=tmp_path))
    assert "spark.sql.catalog.lake.io-impl" not in local and len(local["spark.jars"].split(",")) == 2


def test_storage_builds_an_s3_client_from_the_environment(monkeypatch):
    from pyarrow import fs as pafs

    from shoal import storage
    from shoal.config import StorageSettings

    for var in storage.S3_ENV.values():  # set then delete: monkeypatch restores what configure() exports
        monkeypatch.setenv(var, "x")
        monkeypatch.delenv(var)
    env = storage.configure(StorageSettings(endpoint="http://127.0.0.1:9", access_key="a", secret_key="b"))
    assert env["SHOAL_STORAGE__ENDPOINT"] == "http://127.0.0.1:9" and env["SHOAL_STORAGE__PATH_STYLE"] == "true"
    fs, path = storage.filesystem("s3a://bucket/some/key.txt")
    assert isinstance(fs, pafs.S3FileSystem) and path == "bucket/some/key.txt"
    assert storage.is_remote("s3://b/k") and not storage.is_remote("/tmp/x")


def test_catalog_password_is_quoted_in_the_sqlalchemy_url(tmp_path):
    s = load_settings(
        workspace=tmp_path,
        catalog={
            "type": "postgresql",
            "uri": "jdbc:postgresql://db:5432/lake",
            "user": "sh@al",
            "password": "p@ss/w:rd",
        },
    )
    assert s.catalog_sqlalchemy_uri == "postgresql+psycopg://sh%40al:p%40ss%2Fw%3Ard@db:5432/lake"


def test_cluster_status_without_a_cluster(tmp_path):
    from shoal import cluster

    s = load_settings(workspace=tmp_path)
    assert cluster.status(s) is None and cluster.down(s) == 0


def test_a_misspelt_key_inside_a_section_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "shoal.toml").write_text('[spark]\nmastr = "spark://example:7077"\n')
    with pytest.raises(ConfigError, match=r"spark\.mastr"):
        load_settings()
    monkeypatch.delenv("SHOAL_CONFIG", raising=False)
    (tmp_path / "shoal.toml").write_text('[extract.media]\nspeech_modle = "tiny.en"\n')
    with pytest.raises(ConfigError, match=r"speech_modle"):
        load_settings()


def test_sessions_keep_compiled_code_for_a_thousand_plan_shapes(tmp_path, spark):
    """Long-lived sessions (engine, serve) run the same shapes again: Spark's 100 made them recompile."""
    assert spark_conf(load_settings(workspace=tmp_path))["spark.sql.codegen.cache.maxEntries"] == "1000"
    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == "1000"  # the session took it
    mine = load_settings(workspace=tmp_path, spark={"conf": {"spark.sql.codegen.cache.maxEntries": "50"}})
    assert spark_conf(mine)["spark.sql.codegen.cache.maxEntries"] == "50"  # an operator's choice wins


def test_local_mode_keeps_spark_on_loopback_and_conf_cannot_widen_it(tmp_path):
    s = load_settings(
        workspace=tmp_path,
        spark={"conf": {"spark.driver.bindAddress": "0.0.0.0", "spark.sql.variable.substitute": "true"}},
    )
    conf = spark_conf(s)
    assert conf["spark.driver.bindAddress"] == "127.0.0.1" and conf["spark.driver.host"] == "127.0.0.1"
    assert conf["spark.authenticate"] == "true"
    assert conf["spark.sql.variable.substitute"] == "false"  # no ${env:...} in anyone's SQL
    assert conf["spark.hadoop.fs.permissions.umask-mode"] == "077"
    cluster = spark_conf(load_settings(workspace=tmp_path, spark={"master": "spark://10.0.0.5:7077"}))
    assert "spark.driver.bindAddress" not in cluster  # executors on other hosts must reach the driver


def test_the_workspace_is_private(settings, spark):
    """Created 0700 (catalog, secrets, table files) with catalog.db 0600, by the shared session."""
    import stat

    ws = settings.workspace_dir
    assert stat.S_IMODE(ws.stat().st_mode) == 0o700
    assert stat.S_IMODE((ws / "catalog.db").stat().st_mode) == 0o600
    assert stat.S_IMODE(Path(settings.warehouse_uri).stat().st_mode) == 0o700
    loose = ws.parent / "loose-workspace"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    from shoal.private import private_dir, private_file

    private_dir(loose)
    private_file(loose / "catalog.db")
    assert stat.S_IMODE(loose.stat().st_mode) == 0o700
    assert stat.S_IMODE((loose / "catalog.db").stat().st_mode) == 0o600


def test_cdc_tombstone_retention_is_a_duration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import timedelta

    monkeypatch.chdir(tmp_path)
    assert load_settings().cdc.tombstone_horizon == timedelta(days=30)
    (tmp_path / "shoal.toml").write_text('[cdc]\ntombstone_retention = "12h"\n')
    assert load_settings().cdc.tombstone_horizon == timedelta(hours=12)
    (tmp_path / "shoal.toml").write_text('[cdc]\ntombstone_retention = "never"\n')
    assert load_settings().cdc.tombstone_horizon is None
    (tmp_path / "shoal.toml").write_text('[cdc]\ntombstone_retention = "7 days"\n')
    with pytest.raises(ConfigError, match="tombstone_retention"):
        load_settings()


def test_a_missing_optional_module_names_its_extra() -> None:
    from shoal.extras import dependency_error, extras_for_module

    # Every capability's modules map to the extra that installs them (pyproject's own metadata).
    assert extras_for_module("uvicorn") == ("web",)
    assert extras_for_module("fastapi.routing") == ("web",)
    assert extras_for_module("cv2") == ("media",)
    assert extras_for_module("magic") == ("documents",)
    assert extras_for_module("faiss") == ("search",)
    assert extras_for_module("psycopg") == ("postgres",)
    assert extras_for_module("sklearn") == ("models",)
    assert set(extras_for_module("onnxruntime")) == {"media", "search", "models"}
    assert extras_for_module("pyspark") == () and extras_for_module("no_such_module") == ()
    err = dependency_error(ModuleNotFoundError("No module named 'uvicorn'", name="uvicorn"), "`shoal serve`")
    assert err is not None and err.hint == "pip install 'shoal[web]'"
    assert "`shoal serve` needs the Python module uvicorn, which the web extra installs" in str(err)
    both = dependency_error(ModuleNotFoundError(name="onnxruntime"))
    assert both is not None and both.hint == "pip install 'shoal[all]'"
    assert dependency_error(ModuleNotFoundError(name="shoal.nothing")) is None  # a bug stays a traceback


def test_cli_turns_a_missing_extra_into_an_error_not_a_traceback(tmp_path) -> None:
    import subprocess
    import sys

    # A core-only install, as far as the command can tell: uvicorn cannot be imported.
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "uvicorn.py").write_text("raise ModuleNotFoundError(\"No module named 'uvicorn'\", name='uvicorn')\n")
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("SHOAL_")}
    env.update({"PYTHONPATH": f"{blocker}:{env.get('PYTHONPATH', '')}", "SHOAL_WORKSPACE": str(tmp_path / "ws")})
    done = subprocess.run(
        [sys.executable, "-m", "shoal.cli.console", "--no-engine", "serve", "--port", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert "`shoal serve` needs the Python module uvicorn, which the web extra installs" in done.stderr
    assert "pip install 'shoal[web]'" in done.stderr


def test_malformed_toml_names_file_line_column_and_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess
    import sys

    monkeypatch.chdir(tmp_path)
    (tmp_path / "shoal.toml").write_text('[spark]\nmaster = "local[1]"\nconf = {{ "a" = "b" }}\n')
    with pytest.raises(ConfigError, match=r"shoal\.toml:3:9: not valid TOML") as caught:
        load_settings()
    assert caught.value.hint and "shoal config init" in caught.value.hint
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("SHOAL_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])  # this checkout's shoal, from any folder
    # The installed entry point (warm engine client first), the same as a person types `shoal`.
    for args in (["config", "show"], ["cluster", "status", "--json"]):
        done = subprocess.run(
            [sys.executable, "-m", "shoal.cli.entry", *args], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 1 and "Traceback" not in done.stderr + done.stdout, done.stderr
        assert f"{tmp_path / 'shoal.toml'}:3:9" in done.stderr + done.stdout
        assert "line 3, column 9" in done.stderr + done.stdout
