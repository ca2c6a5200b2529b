"""Shoal over HTTP: the API (`api.py`); the web console builds on it."""

from shoal.web.api import create_app

__all__ = ["create_app"]
