#!/usr/bin/env bash
# The fleet at scale (issue 42, item 6), a benchmark that prints numbers: NODES
# `torchlet fleet join` nodes (W2, --choice biases, 3 rounds of 5 local steps, no evaluate
# rounds) against one stock SuperLink on this machine, through a byte-counting proxy:
# wall time per round, CPU time and peak resident memory per node, bytes on the wire per
# node-round beside the arrays' own.
#
#   FLWR_VENV=/path/to/venv TORCHLET_BIN=target/ci/torchlet NODES=100 tests/fleet/scale.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ulimit -n 65536 2>/dev/null || true
NODES=${NODES:-100} ROUNDS=${ROUNDS:-3} CLIENT=cli CHOICE=${CHOICE:-biases} NO_EVAL=1 SHARDS=slices \
  WIRE=1 SAMPLE=1 CHECK=scale DEADLINE=${DEADLINE:-3600} bash "$ROOT/tests/fleet/e2e.sh"
