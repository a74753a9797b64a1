#!/usr/bin/env bash
# The fleet (issue 42): the wasm32 build of torchlet-fleet's message code, then runs against
# a stock flwr 1.42.0 SuperLink and FedAvg ServerApp on 127.0.0.1 (tests/fleet/e2e.sh): the
# library's example node; `torchlet fleet join` against PyTorch replays of the same rounds
# (tests/fleet/golden, made by tests/fleet/make_fleet_golden.py); the learning curves.
# flwr is installed into a venv under ~/.cache/torchlet-tools when missing.
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
export FLWR_VENV="$VENV" NODE_BIN="$PWD/target/ci/examples/node" TORCHLET_BIN="$PWD/target/ci/torchlet"
G=tests/fleet/golden
# The fault runs' network (few arrays: quick rounds). Words: `run` passes them to env.
lenet="CLIENT=cli MODEL=$G/lenet_tanh.onnx INITIAL=$G/lenet_tanh.initial.safetensors"
LOGS=$(mktemp -d)
trap 'rm -rf "$LOGS"' EXIT
# run NAME VAR=VALUE...: one e2e run (its own SuperLink on a free port), output in $LOGS/NAME.
run() {
    local name=$1
    shift
    if env "$@" timeout 900 bash tests/fleet/e2e.sh > "$LOGS/$name" 2>&1; then
        echo "ok" >> "$LOGS/$name.rc"
    else
        echo "FAILED" >> "$LOGS/$name.rc"
    fi
}
# Two lanes, one SuperLink each: the SuperLink (Python) is the busy process of a run.
equality() {
    run example CLIENT=example NODES=3 ROUNDS=2 DEADLINE=180
    for net in lenet_tanh mbnet_silu; do
        run "$net" CLIENT=cli NODES=8 ROUNDS=3 NO_EVAL=1 MODEL="$G/$net.onnx" \
            INITIAL="$G/$net.initial.safetensors" CHECK=equal CHECK_ARGS="$G/$net.fedavg_3x5.safetensors"
    done
    for w in w1 w2; do
        local model=firmware/assets/${w}_pretrained.tlm initial=tests/golden/w1_torch.safetensors
        [ "$w" = w1 ] || initial=tests/golden/w2/w2_pretrained.safetensors
        run "$w-1x1" CLIENT=cli NODES=8 ROUNDS=1 STEPS=1 NO_EVAL=1 MODEL="$model" INITIAL="$initial" \
            CHECK=equal CHECK_ARGS="$G/$w.fedavg_1x1.safetensors"
        run "$w-3x5" CLIENT=cli NODES=8 ROUNDS=3 NO_EVAL=1 MODEL="$model" INITIAL="$initial" \
            CHECK=spread CHECK_ARGS="$G/$w.fedavg_3x5.safetensors $G/spread.json $w"
    done
    # Spoilt inputs: every round completes, nothing non-finite is averaged, refusals name it.
    for fault in nan extra shape; do
        # shellcheck disable=SC2086
        run "fault-$fault" FAULT="$fault" $lenet NODES=3 ROUNDS=2 CHECK=trained
    done
    departures
}
# A node gone mid-run (in the equality lane, which is otherwise the shorter one).
departures() {
    for fault in kill interrupt; do
        # shellcheck disable=SC2086
        run "fault-$fault" FAULT="$fault" $lenet NODES=4 ROUNDS=3 MIN_NODES=3 EVAL_NODES=3 \
            FRACTION_TRAIN=0.75 ROUND_TIMEOUT=8 CHECK=trained
    done
}
# The SuperLink killed and restarted: the nodes join again and the new run's arrays
# equal PyTorch's.
restart() {
    # shellcheck disable=SC2086
    run fault-restart FAULT=restart $lenet NODES=8 ROUNDS=3 NO_EVAL=1 CHECK=equal \
        CHECK_ARGS="$G/lenet_tanh.fedavg_3x5.safetensors"
}
# The learning curve of biases + head. The full model's (FLEET_LEARN_ALL=1) takes another
# 3-4 minutes of this 2-core machine, past the suite's 40-minute budget: run by hand.
learning() {
    local choices=(biases)
    [ -z "${FLEET_LEARN_ALL:-}" ] || choices+=(all)
    for choice in "${choices[@]}"; do
        run "learn-$choice" CLIENT=cli NODES=10 ROUNDS=10 STEPS=10 BATCH=16 LR=0.01 SHARDS=upper \
            EVAL_HELDOUT=1 EVAL_NODES=1 CHOICE="$choice" INITIAL="$G/w2_digits04.safetensors" \
            DEADLINE=800 CHECK=curve CHECK_ARGS="$G/curves.json $choice"
    done
    restart
}
equality &
lane1=$!
learning &
lane2=$!
wait "$lane1" "$lane2" || true
failed=0
for f in "$LOGS"/*.rc; do
    name=$(basename "$f" .rc)
    echo "--- fleet run $name: $(cat "$f")"
    cat "$LOGS/$name"
    grep -q ok "$f" || failed=1
done
exit "$failed"
