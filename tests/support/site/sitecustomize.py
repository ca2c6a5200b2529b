"""Installs the test path guard in every Python process the suite starts (tests/conftest.py puts
this folder on PYTHONPATH). Stdlib only: it also runs in other virtual environments' Pythons."""

import importlib.util
import os

if os.environ.get("TEST_PATH_GUARD_ROOT"):
    _spec = importlib.util.spec_from_file_location(
        "_shoal_pathguard", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pathguard.py")
    )
    if _spec is not None and _spec.loader is not None:
        _mod = importlib.util.module_from_spec(_spec)
        _spec.loader.exec_module(_mod)
        _mod.install_from_env()
