#!/usr/bin/env bash
# Sets up Shoal and runs the end-to-end demo (product-inventory CDC with time travel).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/shoal demo --workspace demo-workspace "$@"
