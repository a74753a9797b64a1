"""The fleet tests' local data: non-IID digit shards of tests/data/mnist10k.bin.

One rule for tests/fleet/e2e.sh (which writes the shards the nodes read) and for
tests/fleet/make_fleet_golden.py (which replays the same rounds in PyTorch), so that both
see the same samples in the same order.

    python3 tests/fleet/shards.py KIND NODES OUT_DIR   # writes OUT_DIR/shard{1..NODES}.safetensors

KIND:
  - pairs: node i (0-based) holds digits 2i mod 10 and 2i+1 mod 10, the first 10 (i+1)
    of each among records 0..7999, so shards differ in size (20, 40, ...);
  - upper: node i holds digits 5 + i mod 5 and 5 + (i+1) mod 5, 20 of each among
    records 0..7999 (digits 5-9 only; no sample in two shards, for up to 10 nodes);
  - slices: node i holds records 20 i .. 20 i + 19 (mod 8000), any number of nodes.
Also `heldout` (OUT_DIR/heldout.safetensors): records 8000..8999, all ten digits.
x is [N, 1, 28, 28] float32 pixel / 255, y is [N] int64.
"""

import os
import sys

import numpy as np

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def mnist(path=os.path.join(ROOT, "tests/data/mnist10k.bin")):
    raw = open(path, "rb").read()
    assert raw[:8] == b"TLMNIST1", "bad magic"
    count, rows, cols = int.from_bytes(raw[8:12], "little"), raw[12] | raw[13] << 8, raw[14] | raw[15] << 8
    rec = np.frombuffer(raw[16:], np.uint8).reshape(count, 1 + rows * cols)
    labels, pixels = rec[:, 0].astype(np.int64), rec[:, 1:].astype(np.float32) / 255.0
    return pixels.reshape(count, 1, rows, cols), labels


def shard_rows(kind, nodes, labels):
    """The record indices of each node's shard, in order."""
    train = labels[:8000]
    out = []
    for i in range(nodes):
        if kind == "pairs":
            digits, starts, count = (2 * i % 10, (2 * i + 1) % 10), (0, 0), 10 * (i + 1)
        elif kind == "upper":
            digits, count = (5 + i % 5, 5 + (i + 1) % 5), 20
            starts = (40 * (i // 5), 40 * (i // 5) + 20)  # no sample in two shards
        elif kind == "slices":
            out.append((20 * i + np.arange(20)) % 8000)
            continue
        else:
            raise ValueError(f"unknown shard kind {kind!r}")
        out.append(np.concatenate([np.flatnonzero(train == d)[s : s + count] for d, s in zip(digits, starts)]))
    return out


def heldout_rows():
    return np.arange(8000, 9000)


def main():
    from safetensors.numpy import save_file

    kind, nodes, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    x, y = mnist()
    for i, rows in enumerate(shard_rows(kind, nodes, y)):
        save_file({"x": x[rows], "y": y[rows]}, os.path.join(out, f"shard{i + 1}.safetensors"))
    rows = heldout_rows()
    save_file({"x": x[rows], "y": y[rows]}, os.path.join(out, "heldout.safetensors"))


if __name__ == "__main__":
    main()
