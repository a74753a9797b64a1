#!/usr/bin/env bash
# Core engine: formatting, lints, docs, the no_std targets, and the host test suite.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bash .ci/install.sh rust

echo "--- cargo fmt --check"
cargo fmt --all -- --check

echo "--- cargo clippy -D warnings"
cargo clippy --workspace --all-targets -q -- -D warnings
cargo clippy -p torchlet --features defmt -q -- -D warnings
cargo clippy -p torchlet --features small-kernels --all-targets -q -- -D warnings

echo "--- docs (broken intra-doc links are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc -p torchlet --no-deps -q
RUSTDOCFLAGS="-D warnings" cargo doc -p torchlet-onnx --no-deps -q

echo "--- no_std builds (no alloc): Cortex-M0, Cortex-M4F, wasm32"
for target in thumbv6m-none-eabi thumbv7em-none-eabihf wasm32-unknown-unknown; do
    cargo build -p torchlet --release --target "$target" -q
    cargo build -p torchlet --release --target "$target" --features defmt -q
    echo "built torchlet for $target"
done
# The ONNX importer (std) is compiled into the browser package.
cargo build -p torchlet-onnx --release --target wasm32-unknown-unknown -q

echo "--- host tests (profile ci: release without link-time optimization, Cargo.toml)"
# Its own log file, so that runs from several checkouts at once do not share one.
log=$(mktemp -t torchlet-core-tests.XXXXXX.log)
cargo test --workspace --profile ci -q 2>&1 | tee "$log"
grep -q "test result: ok" "$log"
rm -f "$log"
