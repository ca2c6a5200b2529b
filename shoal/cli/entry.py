"""The `shoal` command's entry point: a warm engine runs the command when one serves the
workspace; otherwise it runs here. Nothing heavy is imported before that choice."""

from __future__ import annotations

import sys


def main() -> None:
    from shoal.cli.warm.client import maybe_delegate

    code = maybe_delegate(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from shoal.cli.console import main as run_here

    run_here()


if __name__ == "__main__":
    main()
