#!/usr/bin/env bash
# Speed (issue 8): the specialised f32 kernels against the generic ones in every SIMD
# configuration the code selects by target feature, the wasm32 simd128 build, and one
# quick run of the benchmark harness (it prints numbers and asserts nothing about time).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bash .ci/install.sh rust

# The default build tests every path against the generic kernels: the dispatching entry
# points, the portable tiled kernels (SSE2 here) and, when this CPU has AVX2 + FMA, the
# run-time-dispatched strip kernels called directly (cpuid detection is checked against
# std's). On a CPU without AVX2/FMA the strip kernels must decline without writing.
echo "--- kernels vs generic, default build (SSE2 + AVX2/FMA chosen at run time on x86_64)"
cargo test --release -q -p torchlet --lib kernels::

if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    echo "--- kernels vs generic, AVX2+FMA build (portable kernels with 8-lane backward-weight tiles)"
    RUSTFLAGS="-C target-feature=+avx2,+fma" CARGO_TARGET_DIR=target/avx2 \
        cargo test --release -q -p torchlet --lib kernels::
else
    echo "--- no AVX2/FMA on this CPU: the 8-lane configuration is not tested here"
fi

echo "--- wasm32 with simd128"
RUSTFLAGS="-C target-feature=+simd128" CARGO_TARGET_DIR=target/simd128 \
    cargo build -q -p torchlet --release --target wasm32-unknown-unknown

echo "--- benchmark harness, quick mode (numbers only)"
cargo run --release -q -p torchlet-tests --example bench -- --quick
