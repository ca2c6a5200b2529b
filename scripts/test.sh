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
# Types: mypy over shoal/ ([tool.mypy] in pyproject.toml).
.venv/bin/mypy
phase mypy
mkdir -p test-artifacts
# The suite starts a few hundred short-lived Spark JVMs (each CLI call under test starts one):
# the C1 compiler alone and the serial collector start them faster (measured: a CLI query
# 35-50% faster). spark-defaults.conf reaches every spark-submit, including commands whose
# environment a test strips of SHOAL_* settings. Shoal's own defaults keep the full JIT for
# long jobs. A SPARK_CONF_DIR set by the caller is kept.
if [ -z "${SPARK_CONF_DIR:-}" ]; then
  export SPARK_CONF_DIR="$PWD/test-artifacts/spark-conf"
  mkdir -p "$SPARK_CONF_DIR"
  printf '%s\n' \
    "spark.driver.defaultJavaOptions -XX:TieredStopAtLevel=1 -XX:+UseSerialGC" \
    "spark.executor.defaultJavaOptions -XX:TieredStopAtLevel=1 -XX:+UseSerialGC" \
    > "$SPARK_CONF_DIR/spark-defaults.conf"
fi
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
