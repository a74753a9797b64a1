#!/usr/bin/env bash
# One federated run against a stock flwr 1.42.0 SuperLink on 127.0.0.1: the FedAvg
# ServerApp (tests/fleet/serverapp) and NODES nodes, ROUNDS rounds of STEPS local steps.
# tests/fleet/check.py then checks that every round had a reply with num-examples from every
# node, and CHECK:
# - example (CLIENT=example: core/fleet/examples/node.rs, w <- w (1 - lr) per local step):
#   the final global arrays are w0 (1 - lr)^(steps * rounds) (FedAvg of identical updates);
# - trained (CLIENT=cli: `torchlet fleet join` MODEL on MNIST shards, tests/fleet/shards.py
#   SHARDS, each node with its own kept key): finite, trained, num_batches_tracked counted;
# - equal REF, spread REF SPREAD NAME, curve CURVES NAME: against PyTorch (check.py).
# Every process started here is stopped on exit; the whole run is bounded by DEADLINE s.
#
#   FLWR_VENV=/path/to/venv (flwr==1.42.0 numpy safetensors) CLIENT=example|cli \
#   NODE_BIN=target/.../examples/node TORCHLET_BIN=target/.../torchlet tests/fleet/e2e.sh
# CLIENT=cli settings: MODEL (.tlm or .onnx, converted here; W2 by default), INITIAL
# (safetensors, W2's pretrained state_dict by default), SHARDS (pairs), STEPS (5), BATCH (8),
# LR (0.05), CHOICE (all), EVAL_HELDOUT=1 (nodes evaluate on held-out digits), EVAL_NODES
# (how many evaluate each round: NODES; one is enough on a shared held-out set), NO_EVAL=1
# (no evaluate rounds), MIN_NODES, ROUND_TIMEOUT, FRACTION_TRAIN (the ServerApp's
# min-nodes, round-timeout, fraction-train), WIRE=1 (the nodes reach the SuperLink through
# tests/fleet/wire_proxy.py, which counts the bytes), SAMPLE=1 (tests/fleet/sample_nodes.py
# samples the nodes' CPU time and memory), CHECK and CHECK_ARGS.
# FAULT: nan (node 1's samples hold a NaN), extra (the initial arrays hold one the model
# has not), shape (one has the wrong shape), kill (the last node is killed with SIGKILL in
# the first round it trains), interrupt (the last node gets SIGINT there, leaves and
# exits 0), restart (the SuperLink is killed after round 1, restarted, and the run
# started again: the same nodes must finish it).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${FLWR_VENV:?set FLWR_VENV to a venv with flwr==1.42.0 numpy safetensors}
CLIENT=${CLIENT:-example}
case "$CLIENT" in
  example) NODE_BIN=${NODE_BIN:?set NODE_BIN to the built torchlet-fleet example node} ;;
  cli) TORCHLET_BIN=${TORCHLET_BIN:?set TORCHLET_BIN to the built torchlet command} ;;
  *) echo "CLIENT must be example or cli"; exit 2 ;;
esac
NODES=${NODES:-3}
ROUNDS=${ROUNDS:-2}
STEPS=${STEPS:-5}
BATCH=${BATCH:-8}
LR=${LR:-0.05}
SHARDS=${SHARDS:-pairs}
CHOICE=${CHOICE:-all}
DEADLINE=${DEADLINE:-240}
MODEL=${MODEL:-$ROOT/firmware/assets/w2_pretrained.tlm}
INITIAL=${INITIAL:-$ROOT/tests/golden/w2/w2_pretrained.safetensors}
if [ "$CLIENT" = cli ]; then CHECK=${CHECK:-trained}; else CHECK=${CHECK:-example}; fi
MIN_NODES=${MIN_NODES:-0}
ROUND_TIMEOUT=${ROUND_TIMEOUT:-600}
# Evaluate rounds go to EVAL_NODES nodes when it is set, else to every available node.
FRACTION_EVAL=$("${FLWR_VENV}/bin/python" -c "print(0.0 if '${NO_EVAL:-}' else ${EVAL_NODES:-$NODES} / $NODES)")
EVAL_NODES=${EVAL_NODES:-0}
export NODES ROUNDS STEPS CLIENT EVAL_HELDOUT="${EVAL_HELDOUT:-}" NO_EVAL="${NO_EVAL:-}" EVAL_NODES FAULT="${FAULT:-}"
PY="$VENV/bin/python"
export PATH="$VENV/bin:$PATH" FLWR_TELEMETRY_ENABLED=0 FLWR_DISABLE_UPDATE_CHECK=1
WORK=$(mktemp -d)
export FLWR_HOME="$WORK/flwr-home"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true; done
  sleep 0.5
  for pid in "${PIDS[@]}"; do kill -9 -- "-$pid" 2>/dev/null || true; done
  if [ -n "${KEEP:-}" ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM  # runs the EXIT trap
START=$(date +%s)
left() { echo $((DEADLINE - ($(date +%s) - START))); }

PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$FLWR_HOME"
cat > "$FLWR_HOME/config.toml" <<TOML
[superlink]
default = "local"

[superlink.local]
address = "127.0.0.1:$PORT"
insecure = true
TOML
if [ "$CLIENT" = cli ]; then
  cp "$INITIAL" "$WORK/initial.safetensors"
  "$PY" "$ROOT/tests/fleet/shards.py" "$SHARDS" "$NODES" "$WORK"
  case "$MODEL" in
    *.onnx) "$TORCHLET_BIN" convert "$MODEL" "$WORK/model.tlm" > /dev/null; MODEL="$WORK/model.tlm" ;;
  esac
  case "${FAULT:-}" in
    nan | extra | shape) "$PY" "$ROOT/tests/fleet/check.py" "$WORK" "fault-$FAULT" ;;
  esac
else
"$PY" - "$WORK/initial.safetensors" <<'PY'
import sys
import numpy as np
from safetensors.numpy import save_file
save_file({
    "fc.weight": np.arange(12, dtype=np.float32).reshape(4, 3) / 10,
    "fc.bias": np.array([1.0, -2.0, 0.5, 4.0], dtype=np.float32),
    "bn.num_batches_tracked": np.array(5, dtype=np.int64),
}, sys.argv[1])
PY
fi

start_superlink() {
  setsid flower-superlink --insecure --host 127.0.0.1 --port "$PORT" \
    --disable-runtime-dependency-installation >> "$WORK/superlink.log" 2>&1 &
  SUPERLINK=$!
  PIDS+=("$SUPERLINK")
  disown "$!"  # stopped by cleanup; no job notice
  until "$PY" -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$PORT/health', timeout=1)" 2>/dev/null; do
    [ "$(left)" -gt 0 ] || { echo "FAIL: SuperLink did not come up"; tail -20 "$WORK/superlink.log"; exit 1; }
    sleep 0.5
  done
}
# wait_for TEXT FILE...: until every FILE holds TEXT.
wait_for() {
  local text=$1 f
  shift
  for f in "$@"; do
    until grep -q "$text" "$f" 2>/dev/null; do
      [ "$(left)" -gt 0 ] || { echo "FAIL: no \"$text\" in $f"; tail -n 5 "$WORK"/node*.log; exit 1; }
      sleep 0.2
    done
  done
}
start_run() {
  flwr run "$ROOT/tests/fleet/serverapp" --run-config \
    "initial=\"$WORK/initial.safetensors\" out=\"$WORK/result.json\" num-nodes=$NODES num-rounds=$ROUNDS \
     local-steps=$STEPS batch-size=$BATCH lr=$LR fraction-evaluate=$FRACTION_EVAL evaluate-nodes=$EVAL_NODES \
     min-nodes=$MIN_NODES round-timeout=$ROUND_TIMEOUT fraction-train=${FRACTION_TRAIN:-1.0}" \
    >> "$WORK/flwr-run.log" 2>&1 || { cat "$WORK/flwr-run.log"; exit 1; }
}
start_superlink

NODE_PORT=$PORT
if [ -n "${WIRE:-}" ]; then  # the nodes reach the SuperLink through a byte-counting proxy
  NODE_PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  setsid "$PY" "$ROOT/tests/fleet/wire_proxy.py" "$NODE_PORT" "$PORT" "$WORK/wire.json" > "$WORK/proxy.log" 2>&1 &
  PIDS+=($!)
  sleep 1
fi
EVAL_ARGS=()
NODE_PIDS=()
[ -z "${EVAL_HELDOUT:-}" ] || EVAL_ARGS=(--eval "$WORK/heldout.safetensors")
for i in $(seq 1 "$NODES"); do
  if [ "$CLIENT" = cli ]; then
    XDG_CONFIG_HOME="$WORK/config$i" setsid "$TORCHLET_BIN" fleet join "$MODEL" "$WORK/shard$i.safetensors" \
      --superlink "http://127.0.0.1:$NODE_PORT" --choice "$CHOICE" "${EVAL_ARGS[@]}" > "$WORK/node$i.log" 2>&1 &
  else
    setsid "$NODE_BIN" "http://127.0.0.1:$NODE_PORT" $((10 * i)) > "$WORK/node$i.log" 2>&1 &
  fi
  PIDS+=($!)
  NODE_PIDS+=($!)
done
if [ -n "${SAMPLE:-}" ]; then  # the nodes' CPU time and peak memory
  setsid "$PY" "$ROOT/tests/fleet/sample_nodes.py" "$WORK/nodes.json" "${NODE_PIDS[@]}" &
  PIDS+=($!)
fi
start_run
KILLED=
case "${FAULT:-}" in
  kill)  # the last node, SIGKILL a second after it trained a round (its reply is out: a
    # reply cut off mid-push holds the stock ServerApp about 3 minutes), before its next one
    wait_for "train loss" "$WORK/node$NODES.log"
    sleep 1
    KILLED=${NODE_PIDS[$((NODES - 1))]}
    kill -9 -- "-$KILLED"
    echo "killed node $NODES with SIGKILL after its $(grep "train loss" "$WORK/node$NODES.log" | cut -d: -f1 | tr '\n' ' ')" ;;
  interrupt)  # the last node gets SIGINT (Ctrl-C) after its first round: it must leave
    wait_for "train loss" "$WORK/node$NODES.log"
    sleep 1
    kill -INT "${NODE_PIDS[$((NODES - 1))]}"
    echo "sent SIGINT to node $NODES after its $(grep "train loss" "$WORK/node$NODES.log" | cut -d: -f1 | tr '\n' ' ')"
    wait_for "left after" "$WORK/node$NODES.log"
    grep "left after" "$WORK/node$NODES.log" ;;
  restart)  # the SuperLink (and the run's ServerApp), SIGKILL after round 1; then a new run
    wait_for "round 1: train loss" "$WORK"/node*.log
    kill -9 -- "-$SUPERLINK"
    echo "killed the SuperLink with SIGKILL after round 1; restarting it on port $PORT"
    sleep 2
    rm -f "$WORK/result.json"
    start_superlink
    start_run ;;
esac

# Each node leaves by itself once get-run reports the run finished.
for pid in "${NODE_PIDS[@]}"; do
  [ "$pid" != "$KILLED" ] || continue
  while kill -0 "$pid" 2>/dev/null; do
    [ "$(left)" -gt 0 ] || { echo "FAIL: nodes still running after ${DEADLINE}s"; tail -n 5 "$WORK"/node*.log "$WORK/superlink.log"; exit 1; }
    sleep 0.5
  done
  wait "$pid" || { echo "FAIL: node $pid exited with $?"; tail -n 20 "$WORK"/node*.log; exit 1; }
done
[ -z "${WIRE:-}${SAMPLE:-}" ] || sleep 1.5  # the proxy's and the sampler's last writes
[ -f "$WORK/result.json" ] || { echo "FAIL: no result from the ServerApp"; tail -30 "$WORK/superlink.log"; exit 1; }
# shellcheck disable=SC2086 # CHECK_ARGS: words
"$PY" "$ROOT/tests/fleet/check.py" "$WORK" "$CHECK" ${CHECK_ARGS:-}
echo "fleet e2e ($CHECK): $NODES nodes, $ROUNDS rounds of $STEPS steps: ok in $(( $(date +%s) - START )) s"
