#!/usr/bin/env python3
"""References for the fleet's proofs (issue 42, item 5): the rounds of stock FedAvg over
`torchlet fleet join` clients, replayed in PyTorch without Flower.

    /path/to/venv/bin/python tests/fleet/make_fleet_golden.py [--out tests/fleet/golden]

Needs torch, onnx, numpy and safetensors (not installed by the test command: the outputs
are committed; tests/fleet/proofs.sh reads them).

The rules, as `torchlet fleet join` and Flower 1.42's FedAvg apply them:
  - a client loads the global arrays (buffers included), runs `local-steps` SGD steps
    (PyTorch's SGD, a fresh momentum buffer each round, lr 0.05, momentum 0.9) in training
    mode (BatchNorm on batch statistics, running statistics updated, num_batches_tracked
    counted), mini-batch b being rows (b B) mod N onward of its shard (B = 8), mean
    cross-entropy; it sends every array back with num-examples N;
  - FedAvg: each array (buffers included) is the num-examples-weighted mean of the clients'.
  - shards: tests/fleet/shards.py ("pairs" for 8 clients).

Writes into --out:
  - lenet_tanh.onnx, mbnet_silu.onnx: two networks whose float32 rounding does not grow
    over momentum steps (tanh, average pooling; BatchNorm, depthwise convolutions,
    residual adds, SiLU), TorchScript exporter, opset 17, do_constant_folding=False
    (BatchNorm stays), dynamic batch; their seeded initial state_dicts
    (NAME.initial.safetensors);
  - NAME.fedavg_3x5.safetensors: the global arrays after 3 rounds of 5 local steps
    (8 clients), computed in float64 (stored float64);
  - w1.fedavg_1x1, w2.fedavg_1x1: W1 and W2 (from their pretrained state_dicts) after one
    round of one local step, float64 computation stored as float32 (6e-8 relative, well
    under the 1e-4 tolerance); w1.fedavg_3x5, w2.fedavg_3x5 likewise after 3 rounds of 5;
  - spread.json: for W1 and W2 after 3 x 5, the distance (below) from the float64 result
    of float32 PyTorch replays whose parameters were each scaled by (1 + 1e-6 u),
    u ~ N(0, 1), seeds 1..5;
  - w2_digits04.safetensors: W2 pretrained on digits 0-4 only (records 0..7999 with those
    labels, make_w2.py's recipe, 2 epochs), the start of the learning curves; and
    curves.json: its held-out accuracy (all ten digits, 0-4, 5-9), and those of a float32
    PyTorch replay of the learning runs after each round (10 "upper" clients, LEARN's
    config, biases + head and all).

Distance of arrays A from reference R: max over arrays of max|A - R| / (1e-4 max|R| + 1e-5),
i.e. in units of the proof's tolerance (1 or less passes). W2's Dropout is the identity in
the replays (the exported model has none: ONNX in eval mode drops it).
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.numpy import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "golden"))
import shards  # noqa: E402
from check import distance  # noqa: E402

torch.set_num_threads(1)
EQUAL = {"lr": 0.05, "momentum": 0.9, "batch": 8}  # the equality runs' config
LEARN = {"lr": 0.01, "momentum": 0.9, "batch": 16, "steps": 10, "rounds": 10}  # the learning runs'


class LeNetTanh(nn.Module):
    """conv5 (1->6) tanh avgpool2, conv5 (6->12) tanh avgpool2, linear 192->10."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 6, 5)
        self.c2 = nn.Conv2d(6, 12, 5)
        self.fc = nn.Linear(12 * 4 * 4, 10)

    def forward(self, x):
        x = F.avg_pool2d(torch.tanh(self.c1(x)), 2)
        x = F.avg_pool2d(torch.tanh(self.c2(x)), 2)
        return self.fc(torch.flatten(x, 1))


class Block(nn.Module):
    """expand 1x1 + BN + SiLU, depthwise 3x3 + BN + SiLU, project 1x1 + BN (+ x)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        mid = 2 * cin
        self.conv = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.SiLU(),
            nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False), nn.BatchNorm2d(mid), nn.SiLU(),
            nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout),
        )
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.conv(x)
        return x + y if self.residual else y


class MbNetSilu(nn.Module):
    """stem conv3x3 s2 + BN + SiLU, three blocks (two residual), mean pool, linear 16->10."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.SiLU())
        self.blocks = nn.Sequential(Block(8, 8, 1), Block(8, 16, 2), Block(16, 16, 1))
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(self.blocks(self.stem(x)).mean(dim=(2, 3)))


def w1():
    from export_w1_pretrained import W1

    return W1()


def w2():
    from make_w2 import W2

    m = W2()
    m.dropout = nn.Identity()
    return m


def state(model, dtype):
    return {k: v.detach().clone().to(dtype if v.is_floating_point() else v.dtype) for k, v in model.state_dict().items()}


def local_round(model, glob, x, y, steps, trains=None, dtype=torch.float64, cfg=EQUAL):
    """One client's round from the global arrays `glob`: its state_dict after `steps` steps."""
    model.to(dtype).train()
    model.load_state_dict({k: v.clone() for k, v in glob.items()})
    params = [p for n, p in model.named_parameters() if trains is None or trains(n)]
    for n, p in model.named_parameters():
        p.requires_grad_(trains is None or trains(n))
    opt = torch.optim.SGD(params, lr=cfg["lr"], momentum=cfg["momentum"])
    n, batch = len(x), min(cfg["batch"], len(x))
    for b in range(steps):
        rows = [(b * batch + k) % n for k in range(batch)]
        loss = F.cross_entropy(model(x[rows].to(dtype)), y[rows])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return state(model, dtype), len(x)


def fedavg(model, glob, data, rounds, steps, trains=None, dtype=torch.float64, each_round=None, cfg=EQUAL):
    """FedAvg of len(data) clients: the global arrays after `rounds` rounds."""
    for r in range(rounds):
        results = [local_round(model, glob, x, y, steps, trains, dtype, cfg) for x, y in data]
        total = sum(n for _, n in results)
        glob = {
            k: sum(sd[k].to(torch.float64) * (n / total) for sd, n in results).to(
                dtype if glob[k].is_floating_point() else torch.float64
            )
            for k in glob
        }
        if each_round:
            each_round(r + 1, glob)
    return glob


def numpy_sd(sd, dtype=None):
    out = {}
    for k, v in sd.items():
        a = v.detach().cpu().numpy()
        if dtype is not None and v.is_floating_point():
            a = a.astype(dtype)
        if k.endswith("num_batches_tracked"):
            a = a.astype(np.float64) if a.dtype != np.int64 else a
        out[k] = np.ascontiguousarray(a)
    return out


def export_onnx(model, path):
    model.eval()
    torch.onnx.export(
        model, torch.zeros(2, 1, 28, 28), path, dynamo=False, opset_version=17,
        do_constant_folding=False, input_names=["input"], output_names=["logits"],
        dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}},
    )


def tensors(rows, x, y):
    return [(torch.from_numpy(x[r]), torch.from_numpy(y[r])) for r in rows]


def pretrain_digits04(x, y, epochs=2, seed=0):
    """W2 on records 0..7999 with labels 0-4 (make_w2.py's recipe, fewer epochs)."""
    from make_w2 import W2

    torch.manual_seed(seed)
    model = W2()
    keep = np.flatnonzero(y[:8000] < 5)
    xtr, ytr = torch.from_numpy(x[keep]), torch.from_numpy(y[keep])
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    steps = epochs * (len(keep) // 32)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(keep), generator=torch.Generator().manual_seed(seed + epoch))
        for i in range(0, len(keep) - 31, 32):
            idx = order[i : i + 32]
            loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    return model


def heldout_hits(model, sd, x, y):
    """Per sample, whether `sd`'s eval-mode prediction is right."""
    model.float().eval()
    model.load_state_dict({k: v.clone() for k, v in sd.items()})
    with torch.no_grad():
        return model(torch.from_numpy(x)).argmax(1).numpy() == y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "golden"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    x, y = shards.mnist()
    pairs = tensors(shards.shard_rows("pairs", 8, y), x, y)

    for name, make, seed in (("lenet_tanh", LeNetTanh, 1), ("mbnet_silu", MbNetSilu, 2)):
        torch.manual_seed(seed)
        model = make()
        with torch.no_grad():  # BatchNorm's affine parameters and statistics off their defaults
            sd = model.state_dict()
            for k, v in sd.items():
                norm = k.rsplit(".", 1)[0] + ".running_mean" in sd
                if k.endswith("running_var"):
                    v.mul_(1 + 0.2 * torch.rand_like(v))
                elif norm and v.is_floating_point():
                    v.add_(0.05 * torch.randn_like(v))
        export_onnx(model, os.path.join(a.out, f"{name}.onnx"))
        init = numpy_sd(model.state_dict())
        save_file(init, os.path.join(a.out, f"{name}.initial.safetensors"))
        glob = fedavg(make(), state(model, torch.float64), pairs, 3, 5)
        save_file(numpy_sd(glob), os.path.join(a.out, f"{name}.fedavg_3x5.safetensors"))
        print(f"{name}: {sum(v.size for v in init.values())} values", flush=True)

    spread = {}
    starts = {
        "w1": (w1, load_file(os.path.join(ROOT, "tests/golden/w1_torch.safetensors"))),
        "w2": (w2, load_file(os.path.join(ROOT, "tests/golden/w2/w2_pretrained.safetensors"))),
    }
    for name, (make, init) in starts.items():
        glob0 = {k: torch.from_numpy(np.array(v)) for k, v in init.items()}
        glob64 = {k: v.double() if v.is_floating_point() else v for k, v in glob0.items()}
        one = fedavg(make(), glob64, pairs, 1, 1)
        save_file(numpy_sd(one, np.float32), os.path.join(a.out, f"{name}.fedavg_1x1.safetensors"))
        ref = fedavg(make(), glob64, pairs, 3, 5)
        save_file(numpy_sd(ref, np.float32), os.path.join(a.out, f"{name}.fedavg_3x5.safetensors"))
        ref_np = numpy_sd(ref)
        dists = []
        for s in range(1, 6):
            g = torch.Generator().manual_seed(s)
            perturbed = {
                k: v * (1 + 1e-6 * torch.randn(v.shape, generator=g)) if v.is_floating_point() else v
                for k, v in glob0.items()
            }
            replay = fedavg(make(), perturbed, pairs, 3, 5, dtype=torch.float32)
            dists.append(distance(numpy_sd(replay), ref_np)[0])
        spread[name] = {"float32_perturbed_1e-6": dists}
        print(f"{name}: float32 replays at {[round(d, 2) for d in dists]} x the tolerance", flush=True)
    with open(os.path.join(a.out, "spread.json"), "w") as f:
        json.dump(spread, f, indent=1)

    model = pretrain_digits04(x, y)
    sd04 = numpy_sd(model.state_dict())
    save_file(sd04, os.path.join(a.out, "w2_digits04.safetensors"))
    held = shards.heldout_rows()
    hx, hy = x[held], y[held]
    low = hy < 5

    def accuracies(sd):
        hits = heldout_hits(w2(), sd, hx, hy)
        return {"all": float(hits.mean()), "0-4": float(hits[low].mean()), "5-9": float(hits[~low].mean())}

    upper = tensors(shards.shard_rows("upper", 10, y), x, y)
    curves = {"config": LEARN, "start": accuracies(state(model, torch.float32))}
    for choice, trains in (("biases", lambda n: n.endswith("bias") or n.startswith("fc.")), ("all", None)):
        acc = []
        fedavg(w2(), state(model, torch.float32), upper, LEARN["rounds"], LEARN["steps"], trains,
               torch.float32, each_round=lambda r, g: acc.append(accuracies(g)), cfg=LEARN)
        curves[choice] = acc
        print(f"learning, {choice}: {curves['start']['all']:.3f} -> {[round(v['all'], 3) for v in acc]}", flush=True)
    with open(os.path.join(a.out, "curves.json"), "w") as f:
        json.dump(curves, f, indent=1)


if __name__ == "__main__":
    main()
