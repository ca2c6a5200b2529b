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
if [ "$rc" -eq 5 ]; then echo "test: no tests were collected" >&2; exit 1; fi
# A test that fails beside another process's tests runs again alone, in one process: it must
# pass there (a real failure fails twice). Each such test is named, so the ones that depend on
# their neighbours can be found and fixed.
if [ "$rc" -eq 1 ] && [ "$workers" -gt 1 ]; then
  mapfile -t again < <(.venv/bin/python scripts/failed_tests.py test-artifacts/junit.xml)
  if [ "${#again[@]}" -gt 0 ] && [ "${#again[@]}" -le 20 ]; then
    echo "test: ${#again[@]} test(s) failed in the parallel run; running them again in one process:" >&2
    printf '  %s\n' "${again[@]}" >&2
    set +e
    .venv/bin/python -m pytest -p no:cacheprovider --junitxml=test-artifacts/junit-again.xml "${again[@]}"
    rc=$?
    set -e
  fi
fi
exit "$rc"
