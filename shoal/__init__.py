"""Shoal: a self-hosted lakehouse for governed unstructured data and change data.

`import shoal` stays light: the Python API (`shoal.Lake`, `shoal.extract_file`, ...) is imported on
first use, and no Spark starts until a method needs it (`extract_file(s)` import no pyspark at all).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from shoal.api import Lake, Result
    from shoal.config import Settings, load_settings
    from shoal.extract.single import FileExtraction, extract_file, extract_files

__all__ = [
    "FileExtraction",
    "Lake",
    "Result",
    "Settings",
    "__version__",
    "extract_file",
    "extract_files",
    "load_settings",
]

_LAZY = {
    "Lake": "shoal.api",
    "Result": "shoal.api",
    # The extractors without Spark: shoal.extract.single imports no pyspark module.
    "FileExtraction": "shoal.extract.single",
    "extract_file": "shoal.extract.single",
    "extract_files": "shoal.extract.single",
    "Settings": "shoal.config",
    "load_settings": "shoal.config",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'shoal' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
