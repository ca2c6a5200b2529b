"""One SparkSession per test session, on a throwaway workspace (SQLite catalog + warehouse)."""

from __future__ import annotations

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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules with slow tests first (each kept whole and in its own order): in a parallel run
    the long ones start early instead of leaving one process busy at the end."""
    slow_modules = {item.module.__name__ for item in items if item.get_closest_marker("slow") and item.module}
    items.sort(key=lambda item: 0 if item.module is not None and item.module.__name__ in slow_modules else 1)


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
