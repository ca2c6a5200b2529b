#!/usr/bin/env bash
# Sets up Shoal with its test dependencies, lints, type-checks, and runs the whole test suite
# (slow suites included). Extra arguments go to pytest, e.g. scripts/test.sh -m "not slow".
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
.venv/bin/ruff check shoal tests benchmarks
# Types: mypy over shoal/ ([tool.mypy] in pyproject.toml).
.venv/bin/mypy
mkdir -p test-artifacts
set +e
.venv/bin/python -m pytest -p no:cacheprovider --junitxml=test-artifacts/junit.xml "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then echo "test: no tests were collected" >&2; exit 1; fi
exit "$rc"
