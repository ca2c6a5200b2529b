#!/usr/bin/env bash
# The core installs and runs alone: a fresh venv gets `pip install .` (no extras) and runs CDC,
# SQL, `shoal doctor` and `shoal config init` with it. Uses Python 3.12 when present (the
# newest version Shoal supports), else 3.11.
#   bash scripts/check_core.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for cand in python3.12 $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12 2>/dev/null) python3.11 python3; do
    "$cand" -c 'import sys; sys.exit(sys.version_info[:2] not in ((3, 11), (3, 12)))' 2>/dev/null && { PY="$cand"; break; }
  done
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "check_core: $("$PY" --version) in $work"
"$PY" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
"$work/venv/bin/python" -m pip install -q -c "$root/requirements.lock" "$root" 2>&1 | grep -v "^WARNING: Location" || true
shoal="$work/venv/bin/shoal"
# No extra was installed: none of their packages may be present.
for mod in magic spacy fastapi faster_whisper cv2 faiss; do
  if "$work/venv/bin/python" -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('$mod') is None)"; then
    echo "check_core: $mod is installed, but it belongs to an extra" >&2; exit 1
  fi
done
cd "$work"
"$shoal" --help >/dev/null
"$shoal" config init >/dev/null
"$shoal" doctor --json > doctor.json || { cat doctor.json; exit 1; }
mkdir changes
printf 'op,id,name,last_update_time\nI,1,a,2024-01-01 00:00:00\nI,2,b,2024-01-01 00:00:00\n' > changes/1.csv
printf 'op,id,name,last_update_time\nU,1,A,2024-01-02 00:00:00\nD,2,b,2024-01-02 00:00:00\n' > changes/2.csv
"$shoal" cdc apply changes --table shop.items --key id --sequence last_update_time --json > apply.json
"$shoal" sql "SELECT id, name FROM shop.items ORDER BY id" --format json > rows.json
"$work/venv/bin/python" - <<'PY'
import json
rows = json.load(open("rows.json"))
assert rows == [{"id": 1, "name": "A"}], rows
doctor = json.load(open("doctor.json"))
assert doctor["ok"], doctor
PY
# Capabilities of extras end in an error naming the extra, never a traceback.
mkdir docs && echo "a note" > docs/note.txt
for cmd in "serve --port 1" "ingest docs --json"; do
  if "$shoal" --no-engine $cmd > extra.out 2>&1; then echo "check_core: shoal $cmd ran without its extra" >&2; exit 1; fi
  if grep -q Traceback extra.out || ! grep -q "pip install 'shoal\[" extra.out; then
    echo "check_core: shoal $cmd did not name its extra:" >&2; cat extra.out >&2; exit 1
  fi
done
echo "check_core: ok (core alone: config init, doctor, cdc apply, sql; serve and ingest name their extras)"
