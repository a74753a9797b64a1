#!/usr/bin/env bash
# Weights format and PyTorch interop (issue 7): the host converter round trip on the
# committed PyTorch fixture, and the fuzz regression inputs replayed in the debug
# profile (overflow checks on, as under cargo-fuzz). The format, checkpoint and
# safetensors tests themselves run with the workspace tests of the core stage.
# Fuzzing itself is not part of CI: see tests/README.md ("Fuzzing").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bash .ci/install.sh rust

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "--- converter: safetensors -> device format -> safetensors is byte-identical"
cargo build --profile ci -q -p torchlet-tests --bin weights
bin=target/ci/weights
$bin to-device tests/golden/w1_torch.safetensors "$tmp/w1.tlw"
$bin info "$tmp/w1.tlw"
$bin to-safetensors "$tmp/w1.tlw" "$tmp/w1.safetensors"
cmp "$tmp/w1.safetensors" tests/golden/w1_torch.safetensors
echo "round trip identical"
# A misshapen file must be refused with a message naming the tensor, exit code 2.
if $bin to-device tests/golden/w1_inputs.safetensors "$tmp/bad.tlw" 2>"$tmp/err"; then
    echo "converter accepted a file without W1's tensors" >&2
    exit 1
fi
grep -q "c1.weight" "$tmp/err"
cat "$tmp/err"

echo "--- fuzz regression inputs, debug profile (overflow checks)"
cargo test -q -p torchlet-tests --test weights_fuzz_regressions 2>&1 | tee "$tmp/log"
grep -q "test result: ok" "$tmp/log"
