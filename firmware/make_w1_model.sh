#!/usr/bin/env bash
# The model file finetune_model loads: W1 with finetune's pretrained weights, taken
# from PyTorch through ONNX and the torchlet command, as a user's own model would be.
#
#   bash firmware/make_w1_model.sh      # needs python3 with torch, onnx, safetensors
#
# 1. assets/w1_pretrained.tlw (finetune's weights) -> safetensors (torchlet's W1 names);
# 2. PyTorch loads them into W1 and exports ONNX (tests/golden/export_w1_pretrained.py):
#    assets/w1_pretrained.onnx, committed;
# 3. `torchlet convert` -> assets/w1_pretrained.tlm, committed; the firmware includes it.
# Steps 1 and 3 need no PyTorch: `bash firmware/make_w1_model.sh --convert-only` reruns
# step 3 from the committed ONNX file (the CI stage checks that it makes the same bytes).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
assets=firmware/assets
if [ "${1:-}" != --convert-only ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    cargo run --release -q -p torchlet-tests --bin weights -- \
        to-safetensors "$assets/w1_pretrained.tlw" "$tmp/w1_pretrained.safetensors"
    python3 tests/golden/export_w1_pretrained.py "$tmp/w1_pretrained.safetensors" "$assets/w1_pretrained.onnx"
fi
cargo run --release -q -p torchlet-cli -- convert "$assets/w1_pretrained.onnx" "${OUT:-$assets/w1_pretrained.tlm}"
