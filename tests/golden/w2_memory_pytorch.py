#!/usr/bin/env python3
"""PyTorch's memory for one W2 ("mobile-fcn") training step, batch 1, per choice of
trained parameters: the figures beside torchlet's planner in tests/RESULTS.md.

    python3 tests/golden/w2_memory_pytorch.py [--out tests/golden/w2/w2_memory_pytorch.json]

How it is measured (CPU; torch.cuda is absent here): torch.profiler with
profile_memory=True, record_shapes=True and with_stack=True around the second of two
identical steps (the first creates the momentum buffers), then
`prof.export_memory_timeline(path, device="cpu")`: the bytes of live tensors per
category over time. The figure is the peak of their sum during the step: parameters
(frozen ones too: PyTorch keeps them in RAM), gradients, optimizer state, inputs and
activations; allocator overhead and the interpreter are not counted.

A step: zero_grad(set_to_none=True), forward, cross-entropy, backward, SGD (lr 0.01,
momentum 0.9) over the trained parameters. "all": training mode (BatchNorm batch
statistics, dropout); the other choices: eval mode (BatchNorm statistics frozen) with
only the chosen parameters requiring gradients, as torchlet's `plan --choices` does.
"""
import argparse
import json
import os
import sys
import tempfile

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_w2 import W2  # noqa: E402



def choices(model):
    bn = {f"{n}.weight" for n, m in model.named_modules() if isinstance(m, torch.nn.BatchNorm2d)}
    head = {"fc.weight", "fc.bias"}
    return {
        "all parameters": lambda n: True,
        "last block + head": lambda n: n.startswith("blocks.4.") or n in head,
        "biases + norm scales + head": lambda n: n.endswith("bias") or n in bn or n in head,
        "biases + head": lambda n: n.endswith("bias") or n in head,
        "head only": lambda n: n in head,
    }


def peak_bytes(choice, h, w):
    torch.manual_seed(0)
    model = W2()
    trains = choices(model)[choice]
    for n, p in model.named_parameters():
        p.requires_grad_(trains(n))
    model.train(choice == "all parameters")
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    x, y = torch.randn(1, 1, h, w), torch.tensor([3])

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    step()
    acts = [ProfilerActivity.CPU]
    with profile(activities=acts, profile_memory=True, record_shapes=True, with_stack=True) as prof:
        step()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "timeline.json")
        prof.export_memory_timeline(path, device="cpu")
        with open(path) as f:
            _, sizes = json.load(f)
    return max(sum(s) for s in sizes), sum(p.numel() for p in params)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "w2", "w2_memory_pytorch.json"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    for h, w in [(28, 28), (20, 14)]:
        for choice in choices(W2()):
            peak, values = peak_bytes(choice, h, w)
            rows.append({"size": f"{h}x{w}", "choice": choice, "trained_values": values, "peak_bytes": peak})
            print(f"{h}x{w} {choice:30} trained {values:6}  peak {peak:9,} bytes")
    out = {
        "torch": torch.__version__,
        "how": "torch.profiler memory timeline (export_memory_timeline, device cpu), peak of live tensor bytes "
        "during the second of two identical steps, batch 1, SGD momentum 0.9",
        "rows": rows,
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
