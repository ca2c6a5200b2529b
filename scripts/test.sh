#!/usr/bin/env bash
# Sets up Shoal with its test dependencies, lints, type-checks, and runs the whole test suite
# (slow suites included). Extra arguments go to pytest, e.g. scripts/test.sh -m "not slow".
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
phase() { echo "test: $1 took $(( $(date +%s) - t0 )) s"; t0=$(date +%s); }
bash scripts/setup.sh test
phase setup
.venv/bin/ruff check shoal tests benchmarks
phase ruff
# Types: mypy over shoal/ ([tool.mypy] in pyproject.toml). Its cache lives outside the checkout,
# so a fresh clone on a machine that checked before re-reads only what changed (mypy checks
# each cached module's source hash; a cold cache costs minutes on 2 cores).
MYPY_CACHE_DIR="${MYPY_CACHE_DIR:-$HOME/.cache/shoal/mypy}" .venv/bin/mypy
phase mypy
mkdir -p test-artifacts
# The suite starts many short-lived Spark JVMs (each CLI call under test, each server): the C1
# compiler alone and the serial collector start them faster (measured: a CLI query 35-50%
# faster). SPARK_SUBMIT_OPTS reaches every driver JVM, including commands whose environment a
# test strips of SHOAL_* settings, and (unlike a SPARK_CONF_DIR, a folder on the classpath)
# keeps the JVM class archive usable. The test processes' own long-lived session JVMs too:
# measured, the optimizing compiler cost them more than it gave back on two cores (CLI and CDC
# modules: 154 s against 129 s). Shoal's own defaults keep the full JIT.
export SPARK_SUBMIT_OPTS="${SPARK_SUBMIT_OPTS:--XX:TieredStopAtLevel=1 -XX:+UseSerialGC}"
# Two processes (SHOAL_TEST_WORKERS; 1 runs in this one): most of a test's time is a JVM, a
# server or a subprocess starting, not both cores busy. A module's tests stay in one process
# (its servers and Spark session are started once), and the longest modules start first:
# tests/conftest.py orders them by tests/module_seconds.json, and --no-loadscope-reorder keeps
# xdist from reordering them by their number of tests.
workers="${SHOAL_TEST_WORKERS:-2}"
parallel=()
[ "$workers" -gt 1 ] && parallel=(-n "$workers" --dist loadfile --no-loadscope-reorder)
set +e
.venv/bin/python -m pytest -p no:cacheprovider "${parallel[@]}" --junitxml=test-artifacts/junit.xml "$@"
rc=$?
set -e
phase pytest
# A test that fails in the parallel run is a failure: there is no second chance alone (each
# module has its own data and the suite passes in any order, in one process and in two).
if [ "$rc" -eq 5 ]; then echo "test: no tests were collected" >&2; exit 1; fi
exit "$rc"
