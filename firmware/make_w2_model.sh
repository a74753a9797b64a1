#!/usr/bin/env bash
# The model files finetune_w2 and finetune_w2_int8 load: W2 ("mobile-fcn") pretrained
# in PyTorch on the 28x28 digits by tests/golden/make_w2.py, exported there to ONNX
# (tests/golden/w2/w2.onnx, committed), converted by `torchlet convert` to
# assets/w2_pretrained.tlm, or with --int8 to assets/w2_int8.tlm (the convolution
# weights frozen and stored as int8 with a scale per output channel). Both are
# committed; the firmware includes them. Needs no PyTorch; the CI stage reruns it with
# OUT set and checks that it makes the same bytes.
#
#   bash firmware/make_w2_model.sh [--int8]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ "${1:-}" = --int8 ]; then
    cargo run --release -q -p torchlet-cli -- convert tests/golden/w2/w2.onnx "${OUT:-firmware/assets/w2_int8.tlm}" \
        --freeze '*.0.weight' --freeze '*.3.weight' --freeze '*.6.weight' --int8-frozen
else
    cargo run --release -q -p torchlet-cli -- convert tests/golden/w2/w2.onnx "${OUT:-firmware/assets/w2_pretrained.tlm}"
fi
