"""One SparkSession per test session, on a throwaway workspace (SQLite catalog + warehouse)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from tests.support import pathguard

ROOT = Path(__file__).resolve().parents[1]

# The run's own temporary root: every temporary file of the suite and of the processes it starts
# (TMPDIR) lives under one folder this run made, and the path guard refuses writes and deletes
# anywhere else (tests/support/pathguard.py). xdist's workers inherit it from the controller.
# Spark's scratch is already inside each workspace (`spark.local.dir`; SPARK_LOCAL_DIRS would
# override it and change what the tests check).
if not os.environ.get("TEST_PATH_GUARD_ROOT"):
    _root = tempfile.mkdtemp(prefix="shoal-tests-")
    os.chmod(_root, 0o711)  # others may pass through (the postgres user to its server's folder), not list
    os.environ.update(
        TEST_PATH_GUARD_ROOT=_root,
        TEST_PATH_GUARD_OWNER=str(os.getpid()),
        TEST_PATH_GUARD_ARTIFACTS=str(ROOT / "test-artifacts"),
        TMPDIR=_root,
        HYPOTHESIS_STORAGE_DIRECTORY=os.path.join(_root, "hypothesis"),  # not .hypothesis/ in the checkout
    )
    os.environ.setdefault("TEST_PATH_GUARD", "enforce")
    _site = str(Path(__file__).parent / "support" / "site")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_site, os.environ.get("PYTHONPATH")) if p)
    tempfile.tempdir = None
GUARD = pathguard.install_from_env()
if os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    from hypothesis import configuration as _hypothesis_configuration

    _hypothesis_configuration.set_hypothesis_home_dir(os.environ["HYPOTHESIS_STORAGE_DIRECTORY"])

# pytest-xdist hands each worker the controller's terminal width as COLUMNS (80 when not a
# terminal), which a single-process run does not have: CLI tables then wrap and split words.
# Workers run as the single process does (Shoal's wide default for non-terminals).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)

from shoal.config import Settings, load_settings  # noqa: E402 - after the run root is set up

# Seconds each module took in the last full run (scripts/module_seconds.py writes the file).
MODULE_SECONDS: dict[str, int] = json.loads((Path(__file__).parent / "module_seconds.json").read_text())


def _module_weight(item: pytest.Item, slow_modules: set[Path]) -> int:
    """A module's last recorded seconds; one not recorded yet counts as a minute if it has slow
    tests, else as a quick one."""
    path = item.path
    try:
        key = path.relative_to(ROOT).as_posix()
    except ValueError:
        key = path.as_posix()
    if key in MODULE_SECONDS:
        return MODULE_SECONDS[key]
    return 60 if path in slow_modules else 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest modules first (each kept whole and in its own order): scripts/test.sh hands
    modules out in this order (--dist loadfile --no-loadscope-reorder), so the long ones start
    early instead of leaving one process busy at the end."""
    slow_modules = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: -_module_weight(item, slow_modules))  # stable: modules stay whole
    if os.environ.get("SHOAL_TEST_ORDER") == "reverse":
        # The order-independence check: modules in the opposite order, each still whole.
        modules: dict[Path, list[pytest.Item]] = {}
        for item in items:
            modules.setdefault(item.path, []).append(item)
        items[:] = [item for path in reversed(modules) for item in modules[path]]


@pytest.fixture(scope="session")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    workspace = tmp_path_factory.mktemp("shoal-workspace")
    return load_settings(workspace=workspace, spark={"shuffle_partitions": 2, "master": "local[2]"})


@pytest.fixture(scope="session")
def spark(settings: Settings):
    from shoal.spark import get_spark, stop_spark

    session = get_spark(settings)
    yield session
    stop_spark()


@pytest.fixture
def table_name() -> str:
    """A fresh table name per test so tests never see each other's data."""
    return f"t{uuid.uuid4().hex[:8]}.products"


@pytest.fixture
def source(tmp_path: Path) -> Path:
    d = tmp_path / "changes"
    d.mkdir()
    return d


@pytest.fixture
def cli_env(settings, monkeypatch):
    monkeypatch.setenv("SHOAL_WORKSPACE", str(settings.workspace_dir))
    monkeypatch.delenv("SHOAL_CONFIG", raising=False)


@pytest.fixture(scope="module", autouse=True)
def _storage_env_restored():
    """Each module leaves the S3 client variables as it found them. `storage.configure` exports
    them into the process (Spark's executors and pyarrow read them there), so a module that ran
    an S3 command in-process (doctor, external tables, ingest from S3) made every later local
    command of its worker, and the CLI subprocesses inheriting the environment, write the local
    warehouse through S3FileIO ("Invalid S3 URI"), in the reverse-order run only."""
    from shoal import storage

    before = {var: os.environ.get(var) for var in storage.S3_ENV.values()}
    yield
    for var, value in before.items():
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value


def _guard_log() -> Path | None:
    log = pathguard.log_path()
    return Path(log) if log else None


@pytest.fixture(autouse=True)
def _outside_paths_refused():
    """Fails a test when it (or a process it started) wrote or deleted outside the run's folders,
    even where the PermissionError the guard raised was caught on the way."""
    log = _guard_log()
    start = log.stat().st_size if log and log.exists() else 0
    yield
    if log and log.exists() and log.stat().st_size > start:
        with log.open() as f:
            f.seek(start)
            refused = f.read()
        pytest.fail(f"wrote or deleted outside the test run's folders ({log}):\n{refused}", pytrace=False)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Any refusal fails the run, those outside a test (module fixtures' set-up and tear-down)
    included; the run's root is removed when the run that made it passed."""
    if os.environ.get("TEST_PATH_GUARD_OWNER") != str(os.getpid()):
        return  # a worker: the controller reads every worker's log
    logs = sorted(Path(os.environ["TEST_PATH_GUARD_ROOT"]).glob("guard-*.log"))
    refused = "".join(log.read_text() for log in logs)
    if refused.strip():
        print(f"\npath guard: writes or deletes outside the test run's folders:\n{refused}", file=sys.stderr)
        if GUARD is not None and GUARD.enforce:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    session.config.stash[_PASSED] = session.exitstatus == 0


_PASSED = pytest.StashKey[bool]()


def pytest_report_header(config: pytest.Config) -> str:
    """The run root's free disk: servers the suite starts size themselves from it (SeaweedFS's volume
    count did: on a nearly full disk its uploads hung), so a failing run says what it had."""
    root = os.environ.get("TEST_PATH_GUARD_ROOT", tempfile.gettempdir())
    free_gib = shutil.disk_usage(root).free / 2**30
    low = "  (low: servers and Spark may fail to write)" if free_gib < 5 else ""
    return f"run root: {root}, {free_gib:.1f} GiB free{low}"


def pytest_unconfigure(config: pytest.Config) -> None:
    if os.environ.get("TEST_PATH_GUARD_OWNER") == str(os.getpid()) and config.stash.get(_PASSED, False):
        shutil.rmtree(os.environ["TEST_PATH_GUARD_ROOT"], ignore_errors=True)
