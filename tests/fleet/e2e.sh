#!/usr/bin/env bash
# End to end against a stock flwr 1.42.0 SuperLink on 127.0.0.1: a FedAvg ServerApp
# (tests/fleet/serverapp) and N nodes. Checks that every round completes and that the
# ServerApp saw num-examples from every node; then, by CLIENT:
# - example: core/fleet/examples/node.rs (update w <- w (1 - lr) per local step): the final
#   global arrays are w0 (1 - lr)^(steps * rounds) (FedAvg of identical updates);
# - cli: `torchlet fleet join` with W2 (firmware/assets/w2_pretrained.tlm) on two-digit MNIST
#   shards, each with its own kept key: the final arrays are finite, trained, and
#   num_batches_tracked counted up by steps * rounds.
# Every process started here is stopped on exit; the whole run is bounded by DEADLINE s.
#
#   FLWR_VENV=/path/to/venv (flwr==1.42.0 numpy safetensors) CLIENT=example|cli \
#   NODE_BIN=target/.../examples/node TORCHLET_BIN=target/.../torchlet tests/fleet/e2e.sh
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
DEADLINE=${DEADLINE:-240}
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
  cp "$ROOT/tests/golden/w2/w2_pretrained.safetensors" "$WORK/initial.safetensors"
  "$PY" - "$ROOT/tests/data/mnist10k.bin" "$WORK" "$NODES" <<'PY'
import sys
import numpy as np
from safetensors.numpy import save_file
raw = open(sys.argv[1], "rb").read()
count, rows, cols = int.from_bytes(raw[8:12], "little"), raw[12] | raw[13] << 8, raw[14] | raw[15] << 8
rec = np.frombuffer(raw[16:], np.uint8).reshape(count, 1 + rows * cols)
labels, pixels = rec[:, 0].astype(np.int64), rec[:, 1:].astype(np.float32) / 255.0
for i in range(int(sys.argv[3])):
    digits = (2 * i % 10, (2 * i + 1) % 10)  # non-IID: two classes per node
    idx = np.concatenate([np.flatnonzero(labels == d)[: 10 * (i + 1)] for d in digits])
    save_file({"x": pixels[idx].reshape(-1, 1, rows, cols), "y": labels[idx]}, f"{sys.argv[2]}/shard{i + 1}.safetensors")
PY
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

setsid flower-superlink --insecure --host 127.0.0.1 --port "$PORT" \
  --disable-runtime-dependency-installation > "$WORK/superlink.log" 2>&1 &
PIDS+=($!)
disown "$!"  # stopped by cleanup; no job notice
until "$PY" -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$PORT/health', timeout=1)" 2>/dev/null; do
  [ "$(left)" -gt 0 ] || { echo "FAIL: SuperLink did not come up"; tail -20 "$WORK/superlink.log"; exit 1; }
  sleep 0.5
done
for i in $(seq 1 "$NODES"); do
  if [ "$CLIENT" = cli ]; then
    XDG_CONFIG_HOME="$WORK/config$i" setsid "$TORCHLET_BIN" fleet join "$ROOT/firmware/assets/w2_pretrained.tlm" \
      "$WORK/shard$i.safetensors" --superlink "http://127.0.0.1:$PORT" > "$WORK/node$i.log" 2>&1 &
  else
    setsid "$NODE_BIN" "http://127.0.0.1:$PORT" $((10 * i)) > "$WORK/node$i.log" 2>&1 &
  fi
  PIDS+=($!)
done
NODE_PIDS=("${PIDS[@]:1}")
flwr run "$ROOT/tests/fleet/serverapp" --run-config \
  "initial=\"$WORK/initial.safetensors\" out=\"$WORK/result.json\" num-nodes=$NODES num-rounds=$ROUNDS" \
  > "$WORK/flwr-run.log" 2>&1 || { cat "$WORK/flwr-run.log"; exit 1; }

# Each node leaves by itself once get-run reports the run finished.
for pid in "${NODE_PIDS[@]}"; do
  while kill -0 "$pid" 2>/dev/null; do
    [ "$(left)" -gt 0 ] || { echo "FAIL: nodes still running after ${DEADLINE}s"; tail -5 "$WORK"/node*.log "$WORK/superlink.log"; exit 1; }
    sleep 0.5
  done
  wait "$pid" || { echo "FAIL: node $pid exited with $?"; tail -20 "$WORK"/node*.log; exit 1; }
done
[ -f "$WORK/result.json" ] || { echo "FAIL: no result from the ServerApp"; tail -30 "$WORK/superlink.log"; exit 1; }
"$PY" - "$WORK/result.json" "$WORK/initial.safetensors" "$NODES" "$ROUNDS" "$CLIENT" <<'PY'
import json, sys
import numpy as np
from safetensors.numpy import load_file
result, initial = json.load(open(sys.argv[1])), load_file(sys.argv[2])
nodes, rounds, lr, steps, client = int(sys.argv[3]), int(sys.argv[4]), 0.05, 5, sys.argv[5]
want = sorted((20.0 if client == "cli" else 10.0) * (i + 1) for i in range(nodes))
for kind in ("train", "evaluate"):
    assert len(result["rounds"][kind]) == rounds, (kind, len(result["rounds"][kind]))
    for r, rows in enumerate(result["rounds"][kind], 1):
        seen = sorted(row["num-examples"] for row in rows)
        assert seen == want, f"{kind} round {r}: num-examples {seen}, want {want}"
        print(f"{kind} round {r}: num-examples {seen}, loss {[round(row.get('train-loss', row.get('eval-loss')), 6) for row in rows]}")
if client == "cli":
    assert set(result["arrays"]) == set(initial), "the global arrays are the initial names"
    changed = 0
    for name, w0 in initial.items():
        got = np.array(result["arrays"][name], dtype=np.float64)
        assert np.all(np.isfinite(got)), name
        if name.endswith("num_batches_tracked"):
            assert abs(float(got) - float(w0) - steps * rounds) < 1e-9 * float(w0 + 1), (name, float(got), float(w0))
        else:
            changed += int(not np.allclose(got, w0))
    print(f"final: every array finite, {changed} of {len(initial)} changed, num_batches_tracked + {steps * rounds}")
    assert changed > len(initial) // 2
    sys.exit(0)
for name, w0 in initial.items():
    got = np.array(result["arrays"][name])
    want_w = w0 * (1 - lr) ** (steps * rounds) if w0.dtype == np.float32 else w0
    err = float(np.max(np.abs(got - want_w))) if got.size else 0.0
    assert err <= 1e-5 * max(1.0, float(np.max(np.abs(want_w)))), (name, err)
    print(f"final {name}: max |global - w0 (1-lr)^{steps * rounds}| = {err:.2e}")
PY
echo "fleet e2e: $NODES nodes, $ROUNDS rounds: ok in $(( $(date +%s) - START )) s"
