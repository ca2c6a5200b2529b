"""The `shoal` entry point (pyproject's `shoal.cli.console:main`); the root lives in `app.py`."""

from shoal.cli.app import app, main

__all__ = ["app", "main"]

if __name__ == "__main__":
    main()
