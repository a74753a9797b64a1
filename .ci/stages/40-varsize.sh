#!/usr/bin/env bash
# Variable-size inputs: planner / memory / bad-input tests and a small run of the
# varsize_digits example (shape trace, plans, seven input preparations for one short
# epoch each). The pad and interpolate golden cases (tests/golden/ops.json, checked by
# the conformance tests) and the accuracy tests on the variable-size digits
# (tests/tests/varsize_digits.rs, varsize_batch.rs) run with `cargo test --workspace`
# in the core stage.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bash .ci/install.sh rust

echo "--- varsize tests"
cargo test --profile ci -q -p torchlet-tests --test varsize

echo "--- varsize_digits example (small: 1 epoch, 300 training digits)"
cargo run --profile ci -q -p torchlet-tests --example varsize_digits -- 1 32 300 1 | tee /tmp/torchlet-varsize.log
grep -q "^summary" /tmp/torchlet-varsize.log
