#!/usr/bin/env bash
# Fixed point (Q16.16): the same 50-step W1 training run must give a byte-identical
# weight hash on the host (x86_64), on wasm32 (a bare module run by node) and on
# thumbv6m-none-eabi (the firmware program m0_determinism on QEMU mps2-an385). Also prints
# the M0 kernel instruction counts (m0_kernel_cost), and checks the `micromath` feature
# (approximate f32 functions: error bounds, W1 trains).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bash .ci/install.sh rust qemu defmt
eval "$(bash .ci/install.sh env)"
command -v node >/dev/null 2>&1 || { sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo; $sudo apt-get install -y nodejs >/dev/null; }
ROOT=$(pwd)
hash_of() { grep -o 'DETERMINISM_HASH [0-9a-f]*' | awk '{print $2}' | head -n1; }

echo "--- host (x86_64)"
host=$(cargo test -q --profile ci -p torchlet-tests --test fixed_determinism -- --nocapture 2>&1 | tee >(cat >&2) | hash_of)

echo "--- wasm32 (node $(node --version))"
(cd tests/determinism-wasm && CARGO_TARGET_DIR="$ROOT/target" cargo build -q --release --target wasm32-unknown-unknown)
wasm=$(node tests/determinism-wasm/run.mjs target/wasm32-unknown-unknown/release/torchlet_determinism_wasm.wasm | tee >(cat >&2) | hash_of)

echo "--- thumbv6m-none-eabi (QEMU mps2-an385)"
# The firmware workspace's M0 programs on the larger board, at the M0 benchmark profile.
m0run() {
    (cd firmware && QEMU_TIMEOUT=600 cargo run -q --profile m0-bench --target thumbv6m-none-eabi \
        --features mps2-an385 --bin "$1")
}
m0=$(m0run m0_determinism | tee >(cat >&2) | hash_of)

echo "host $host  wasm32 $wasm  thumbv6m $m0"
if [ -z "$host" ] || [ "$host" != "$wasm" ] || [ "$host" != "$m0" ]; then
    echo "FAIL: fixed-point hashes differ across targets" >&2
    exit 1
fi
echo "fixed-point determinism: all three hashes equal ($host)"

echo "--- benchmark: instructions per MAC on thumbv6m (QEMU -icount), not a test"
m0run m0_kernel_cost

echo "--- micromath feature: approximate f32 functions, error bounded, W1 still trains"
cargo clippy -q -p torchlet-tests --features micromath --all-targets -- -D warnings
cargo build -q -p torchlet --release --target thumbv6m-none-eabi --features micromath
cargo test -q --profile ci -p torchlet-tests --features micromath --test micromath 2>&1 | tee /tmp/torchlet-micromath.log
grep -q "test result: ok. 2 passed" /tmp/torchlet-micromath.log
