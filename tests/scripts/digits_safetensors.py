#!/usr/bin/env python3
"""The MNIST digits of tests/data/mnist10k.bin as safetensors for `torchlet train`:
x (float32 [N, 1, 28, 28], pixel / 255) and y (int64 [N]).

    python3 tests/scripts/digits_safetensors.py OUT.safetensors [--first 0] [--count 8000]

Records 0..7999 are the training digits, 8000..9999 the held-out ones. Needs numpy and
safetensors (pip install numpy safetensors).
"""
import argparse
import os
import struct

import numpy as np
from safetensors.numpy import save_file

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--first", type=int, default=0)
ap.add_argument("--count", type=int, default=8000)
a = ap.parse_args()
raw = open(os.path.join(ROOT, "tests/data/mnist10k.bin"), "rb").read()
assert raw[:8] == b"TLMNIST1", "bad magic"
n, rows, cols = struct.unpack_from("<IHH", raw, 8)
body = np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, 1 + rows * cols)[a.first : a.first + a.count]
x = (body[:, 1:].astype(np.float32) / 255.0).reshape(-1, 1, rows, cols)
save_file({"x": x, "y": body[:, 0].astype(np.int64)}, a.out)
print(f"{a.out}: {len(x)} digits")
