#!/usr/bin/env python3
"""PyTorch eager CPU timings (one thread) of the ONNX zoo's models, for
tests/examples/zoo_bench.rs, which runs this between its own rounds:

    python3 tests/golden/bench_zoo_pytorch.py [--iters 20] MODEL ...

For each model (built by make_onnx_zoo.py's constructors, seed 0) and batch 1 and 8 at
96x96 (L 96 for 1-D models, [N, features] for the MLP), prints one JSON line:
    {"model": ..., "batch": N, "train_cpu_us": ..., "infer_cpu_us": ...}
  - train: zero_grad + forward (training mode) + cross-entropy + backward + SGD (lr 0.01);
  - infer: forward in eval mode under torch.no_grad();
each the median thread CPU time (time.thread_time_ns) of `iters` iterations after a
tenth as many (at least 3) warm-ups, in NCHW.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_onnx_zoo as zoo  # noqa: E402


def timed(fn, iters):
    for _ in range(max(3, iters // 10)):
        fn()
    v = []
    for _ in range(iters):
        t0 = time.thread_time_ns()
        fn()
        v.append((time.thread_time_ns() - t0) / 1e3)
    return statistics.median(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    torch.set_num_threads(1)
    for name in a.models:
        ctor, c, size, *_ = zoo.ZOO[name]
        torch.manual_seed(0)
        model = ctor()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for n in (1, 8):
            spatial = {0: (), 1: (96,), 2: (96, 96)}[len(size)]
            x = torch.randn(n, c, *spatial) if spatial else torch.randn(n, c)
            t = torch.zeros(n, dtype=torch.long)

            def train():
                model.train()
                opt.zero_grad()
                F.cross_entropy(model(x), t).backward()
                opt.step()

            def infer():
                model.eval()
                with torch.no_grad():
                    model(x)

            print(json.dumps({"model": name, "batch": n, "train_cpu_us": timed(train, a.iters),
                              "infer_cpu_us": timed(infer, a.iters)}), flush=True)


if __name__ == "__main__":
    main()
