#!/usr/bin/env bash
# Firmware: builds the Cortex-M programs, runs them in QEMU under a timeout, and checks
# their exit status and expected defmt lines.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bash .ci/install.sh rust qemu defmt
eval "$(bash .ci/install.sh env)"
cd firmware

# run_bin BIN [cargo args...]: runs in QEMU (via the runner) and keeps the log.
run_bin() {
    local bin=$1; shift
    local log="target/qemu-$bin.log" rc=0
    timeout 300 cargo run --release -q --bin "$bin" "$@" >"$log" 2>&1 || rc=$?
    cat "$log"
    if [ "$rc" -ne 0 ]; then
        echo "FAIL: $bin exited with status $rc" >&2
        exit 1
    fi
}
# expect BIN REGEX: the log of BIN has a line matching REGEX.
expect() {
    grep -Eq "$2" "target/qemu-$1.log" || { echo "FAIL: $1: no line matching '$2'" >&2; exit 1; }
}

echo "--- cargo fmt / clippy (firmware workspace)"
cargo fmt --all -- --check
cargo clippy --release -q -- -D warnings

echo "--- w1_step (M4F, mps2-an386)"
run_bin w1_step
expect w1_step 'INFO +high-water [0-9]+ bytes \(plan [0-9]+\)'
expect w1_step 'INFO +PASS w1_step'
