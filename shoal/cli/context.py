"""State shared by the CLI's command modules: the --config path and whether output is JSON."""

from __future__ import annotations

from shoal.config import Settings, load_settings

state: dict[str, object] = {"config": None, "json": False}


def settings() -> Settings:
    return load_settings(state["config"])  # type: ignore[arg-type]
