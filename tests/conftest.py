"""One SparkSession per test session, on a throwaway workspace (SQLite catalog + warehouse)."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

# pytest-xdist hands each worker the controller's terminal width as COLUMNS (80 when not a
# terminal), which a single-process run does not have: CLI tables then wrap and split words.
# Workers run as the single process does (Shoal's wide default for non-terminals).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)

from shoal.config import Settings, load_settings

# Seconds each module took in the last full run (scripts/module_seconds.py writes the file).
MODULE_SECONDS: dict[str, int] = json.loads((Path(__file__).parent / "module_seconds.json").read_text())
ROOT = Path(__file__).resolve().parents[1]


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
