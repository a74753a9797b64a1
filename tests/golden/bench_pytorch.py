#!/usr/bin/env python3
"""PyTorch eager CPU baseline timings for workloads W1 and W2 ("mobile-fcn"), one thread.

    python3 tests/golden/bench_pytorch.py [--iters 200] [--iters-b32 20] [--momentum 0.0]
                                          [--layouts nchw,channels_last] [--case NAME]

For each case (W1: b1-28x28, b32-28x28, b1-12x20; W2: w2-b1-28x28, w2-b32-28x28,
w2-b1-20x14), prints one JSON line on stdout:
    {"case": "b1-28x28", "train_us": ..., "infer_us": ..., "train_cpu_us": ...,
     "infer_cpu_us": ..., "train_iters": N, "infer_iters": N,
     "train_layout": "nchw", "infer_layout": "channels_last", "by_layout": {...}}
  - train_us: median wall time of one training step = zero_grad + forward + cross-entropy
    + backward + SGD step (lr 0.01, momentum as given, default 0).
  - infer_us: median wall time of one forward pass in eval mode under torch.no_grad().
  - W2 is tests/golden/make_w2.py's W2 (imported from it); its training steps run in train
    mode (BatchNorm on batch statistics, dropout 0.1), as torchlet's bench does.
  - train_cpu_us / infer_cpu_us: the same, measured as CPU time of the calling thread
    (time.thread_time_ns; with one torch thread, forward and CPU backward both run on it).
    Less sensitive to other processes on a busy machine than wall time, but not immune
    (caches, frequency).
  - Layouts: the case is measured in every memory layout asked for (default both NCHW and
    channels_last: PyTorch's NCHW max-pool is slow on the CPU, pytorch/pytorch#51393, and
    channels_last avoids it at batch 32, while NCHW wins at batch 1), and the faster
    layout's figures (by CPU time, separately for training and inference) are reported, so
    the comparison is against PyTorch at its best; `by_layout` keeps every layout's figures.
Each timing is preceded by warm-up iterations (a tenth of the count, at least 5). The
input is a fixed random tensor (values do not change the amount of work). Library
versions and settings go to stderr. Other load on the machine inflates the numbers:
compare with the engine side by side in the same run, never against stored numbers.
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from make_w2 import W2
from w1_reference import w1

torch.set_num_threads(1)
torch.set_num_interop_threads(1)


def median_us(fn, iters):
    for _ in range(max(5, iters // 10)):
        fn()
    wall, cpu = [], []
    for _ in range(iters):
        c0 = time.thread_time_ns()
        t0 = time.perf_counter_ns()
        fn()
        wall.append(time.perf_counter_ns() - t0)
        cpu.append(time.thread_time_ns() - c0)
    return statistics.median(wall) / 1000.0, statistics.median(cpu) / 1000.0


def bench_layout(net, batch, h, w, iters, momentum, layout):
    """(train wall, train cpu, infer wall, infer cpu) in us for one memory layout."""
    torch.manual_seed(0)
    model = net()
    g = torch.Generator().manual_seed(1)
    x = torch.rand(batch, 1, h, w, generator=g)
    y = torch.randint(0, 10, (batch,), generator=g)
    if layout == "channels_last":
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=momentum)

    def train_step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    def infer():
        with torch.no_grad():
            model(x)

    model.train()
    train, train_cpu = median_us(train_step, iters)
    model.eval()
    inf, inf_cpu = median_us(infer, max(iters, 200))
    return train, train_cpu, inf, inf_cpu


def bench(net, name, batch, h, w, iters, momentum, layouts):
    runs = {l: bench_layout(net, batch, h, w, iters, momentum, l) for l in layouts}
    best_train = min(layouts, key=lambda l: runs[l][1])
    best_infer = min(layouts, key=lambda l: runs[l][3])
    train, train_cpu = runs[best_train][:2]
    inf, inf_cpu = runs[best_infer][2:]
    by_layout = {l: {"train_cpu_us": round(r[1], 1), "infer_cpu_us": round(r[3], 1)}
                 for l, r in runs.items()}
    print(json.dumps({"case": name, "train_us": round(train, 1), "infer_us": round(inf, 1),
                      "train_cpu_us": round(train_cpu, 1), "infer_cpu_us": round(inf_cpu, 1),
                      "train_iters": iters, "infer_iters": max(iters, 200),
                      "train_layout": best_train, "infer_layout": best_infer,
                      "by_layout": by_layout}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--iters-b32", type=int, default=20)
    ap.add_argument("--momentum", type=float, default=0.0)
    ap.add_argument("--case", default=None, help="run only this case")
    ap.add_argument("--layouts", default="nchw,channels_last",
                    help="comma-separated memory layouts to try: nchw, channels_last")
    a = ap.parse_args()
    layouts = a.layouts.split(",")
    for l in layouts:
        if l not in ("nchw", "channels_last"):
            ap.error(f"unknown layout {l!r}")
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"SGD lr 0.01 momentum {a.momentum}, layouts {layouts}", file=sys.stderr)
    cases = [
        (w1, "b1-28x28", 1, 28, 28, a.iters),
        (w1, "b32-28x28", 32, 28, 28, a.iters_b32),
        (w1, "b1-12x20", 1, 12, 20, a.iters),
        (W2, "w2-b1-28x28", 1, 28, 28, a.iters),
        (W2, "w2-b32-28x28", 32, 28, 28, a.iters_b32),
        (W2, "w2-b1-20x14", 1, 20, 14, a.iters),
    ]
    if a.case is not None and a.case not in [c[1] for c in cases]:
        ap.error(f"unknown case {a.case!r}")
    for net, name, batch, h, w, iters in cases:
        if a.case is None or a.case == name:
            bench(net, name, batch, h, w, iters, a.momentum, layouts)


if __name__ == "__main__":
    main()
