"""Shoal's Python API: `shoal.Lake` (a workspace from settings) and `shoal.extract_file` (one file,
no lake). See docs/python-api.md."""

from shoal.api.lake import Cdc, Lake, Workflows
from shoal.api.result import Result

__all__ = ["Cdc", "Lake", "Result", "Workflows"]
