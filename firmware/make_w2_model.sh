#!/usr/bin/env bash
# The model file finetune_w2 loads: W2 ("mobile-fcn") pretrained in PyTorch on the
# 28x28 digits by tests/golden/make_w2.py, exported there to ONNX
# (tests/golden/w2/w2.onnx, committed), converted by `torchlet convert` to
# assets/w2_pretrained.tlm (committed; the firmware includes it). Needs no PyTorch;
# the CI stage reruns it with OUT set and checks that it makes the same bytes.
#
#   bash firmware/make_w2_model.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cargo run --release -q -p torchlet-cli -- convert tests/golden/w2/w2.onnx "${OUT:-firmware/assets/w2_pretrained.tlm}"
