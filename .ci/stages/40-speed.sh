#!/usr/bin/env bash
# Speed: the specialised f32 kernels against the generic ones in every SIMD
# configuration the code selects by target feature, the wasm32 simd128 build, one
# quick run of the benchmark harness (it prints numbers and asserts nothing about time),
# and a check that tests/RESULTS.md still has the block the harness writes (CI never
# rewrites it: `bench -- --write-results tests/RESULTS.md` is for people).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bash .ci/install.sh rust

# The default build tests every path against the generic kernels: the dispatching entry
# points, the portable tiled kernels (SSE2 here) and, when this CPU has AVX2 + FMA, the
# run-time-dispatched strip kernels called directly (cpuid detection is checked against
# std's). On a CPU without AVX2/FMA the strip kernels must decline without writing.
echo "--- kernels vs generic, default build (SSE2 + AVX2/FMA chosen at run time on x86_64)"
cargo test --profile ci -q -p torchlet --lib kernels::

if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
    echo "--- kernels vs generic, AVX2+FMA build (portable kernels with 8-lane backward-weight tiles)"
    RUSTFLAGS="-C target-feature=+avx2,+fma" CARGO_TARGET_DIR=target/avx2 \
        cargo test --profile ci -q -p torchlet --lib kernels::
else
    echo "--- no AVX2/FMA on this CPU: the 8-lane configuration is not tested here"
fi

echo "--- wasm32 with simd128"
RUSTFLAGS="-C target-feature=+simd128" CARGO_TARGET_DIR=target/simd128 \
    cargo build -q -p torchlet --release --target wasm32-unknown-unknown

echo "--- benchmark harness, quick mode (numbers only)"
cargo run --profile ci -q -p torchlet-tests --example bench -- --quick

echo "--- tests/RESULTS.md: the benchmark's block is there and well formed"
awk '
    /^<!-- bench:begin -->$/ { b++; inside = 1; next }
    /^<!-- bench:end -->$/   { e++; inside = 0; next }
    inside && /^Measured .* at commit .* by$/ { head++ }
    inside && /thread CPU time/ { cpu++ }
    inside && /^b1-28x28 / { rows++ }
    END {
        if (b != 1 || e != 1 || head != 1 || cpu < 1 || rows < 2) {
            printf "tests/RESULTS.md: expected one bench:begin/bench:end block with a Measured line and the W1 tables (begin %d, end %d, header %d, CPU table %d, rows %d)\n", b, e, head, cpu, rows
            exit 1
        }
    }' tests/RESULTS.md
