#!/usr/bin/env bash
# The fleet (issue 42): the wasm32 build of torchlet-fleet's message code, then two
# end-to-end runs against a stock flwr 1.42.0 SuperLink and FedAvg ServerApp on 127.0.0.1
# (tests/fleet/e2e.sh: the library's example node, then `torchlet fleet join` with W2 on
# MNIST shards). flwr is installed into a venv under ~/.cache/torchlet-tools when missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bash .ci/install.sh rust
TOOLS_DIR="${TORCHLET_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/torchlet-tools}"
VENV="$TOOLS_DIR/venv-flwr-1.42.0"
if ! "$VENV/bin/python" -c 'import flwr, numpy, safetensors; assert flwr.__version__ == "1.42.0"' 2>/dev/null; then
    echo "--- installing flwr==1.42.0 into $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q flwr==1.42.0 numpy safetensors
fi

# fmt, clippy and the unit tests of torchlet-fleet and the CLI's fleet round run with the
# workspace in the core stage; here the I/O-free build (wasm32) and the runs.
echo "--- torchlet-fleet without its HTTP client: clippy, and the wasm32 build of the message code"
cargo clippy -p torchlet-fleet --no-default-features -q -- -D warnings
cargo build -p torchlet-fleet --target wasm32-unknown-unknown --no-default-features --profile ci -q

echo "--- end to end against a stock SuperLink"
cargo build -p torchlet-fleet --example node --profile ci -q
cargo build -p torchlet-cli --profile ci -q
export FLWR_VENV="$VENV"
CLIENT=example NODE_BIN="$PWD/target/ci/examples/node" NODES=3 ROUNDS=2 DEADLINE=180 \
    timeout 200 bash tests/fleet/e2e.sh
CLIENT=cli TORCHLET_BIN="$PWD/target/ci/torchlet" NODES=3 ROUNDS=2 DEADLINE=240 \
    timeout 260 bash tests/fleet/e2e.sh
