#!/usr/bin/env bash
# The machine-dependence check (issue 48): the tests that assert on a model's or an OCR engine's
# output run again with other thread counts and with CTranslate2's and OpenBLAS's CPU dispatch
# held to older instruction sets. A test that passes only on the CPU path of the machine that
# wrote it fails here. Run after scripts/test.sh set up .venv:
#   bash scripts/machine_dependence.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
modules=(
  tests/extract/test_media_quality.py tests/extract/test_media_units.py tests/extract/test_media.py
  tests/extract/test_language.py tests/extract/test_extractors.py tests/extract/test_nlp_shared.py
  tests/extract/test_mobilenet_onnx.py tests/search/test_embed_onnx.py
)
run() {
  echo "machine_dependence: $*"
  env "$@" .venv/bin/python -m pytest -p no:cacheprovider -q -n 2 --dist loadfile "${modules[@]}" "${extra[@]}"
}
extra=("$@")
# One thread everywhere, AVX2 at most (no AVX-512), an older OpenBLAS kernel.
run OMP_NUM_THREADS=1 OMP_THREAD_LIMIT=1 CT2_FORCE_CPU_ISA=AVX2 OPENBLAS_CORETYPE=Haswell SHOAL_EXTRACT__MEDIA__SPEECH_THREADS=1
# Three threads, CTranslate2's plain AVX kernels, OpenBLAS's Sandy Bridge ones.
run OMP_NUM_THREADS=3 CT2_FORCE_CPU_ISA=AVX OPENBLAS_CORETYPE=Sandybridge SHOAL_EXTRACT__MEDIA__SPEECH_THREADS=3
echo "machine_dependence: ok"
