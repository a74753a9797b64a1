#!/usr/bin/env bash
# The whole test suite, on a fresh machine or a provisioned one:
#
#   bash .ci/test.sh            # every stage
#   bash .ci/test.sh core wasm  # only the stages whose names contain these words
#
# It installs what it needs first (idempotent, see .ci/install.sh), then runs every
# stage script of .ci/stages/ in order; each stage is one front or concern (core,
# wasm, firmware, ...). Any failure stops the run with a non-zero exit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export CARGO_TERM_COLOR=never
start=$SECONDS
stages=()
for s in .ci/stages/*.sh; do
    name=$(basename "$s" .sh)
    if [ $# -eq 0 ]; then stages+=("$s"); continue; fi
    for want in "$@"; do
        case "$name" in *"$want"*) stages+=("$s") ;; esac
    done
done
for s in "${stages[@]}"; do
    t0=$SECONDS
    echo "=== stage $(basename "$s" .sh)"
    bash "$s"
    echo "=== stage $(basename "$s" .sh) passed in $((SECONDS - t0)) s"
done
echo "=== all stages passed in $((SECONDS - start)) s"
