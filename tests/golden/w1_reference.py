#!/usr/bin/env python3
"""PyTorch reference run of workload W1 ("digits-fcn", torchlet::nn::digits_fcn) on tests/data/mnist10k.bin.

    python3 tests/golden/w1_reference.py [--lr 0.01] [--momentum 0.9] [--batch 32]
                                         [--epochs 15] [--seed 0] [--data tests/data/mnist10k.bin]

Recipe (the Rust end-to-end test uses the same one):
  - data: records 0..7999 of mnist10k.bin train, 8000..9999 test; x = pixel / 255 (float32,
    no normalisation), shape [N, 1, 28, 28]; labels 0..9.
  - model (6,218 parameters):
      conv3x3(1->8, pad 1) ReLU maxpool2 ; conv3x3(8->16, pad 1) ReLU maxpool2 ;
      conv3x3(16->32, pad 1) ReLU ; global average pool ; linear(32->10)
  - init: PyTorch defaults (weights and biases uniform in +-1/sqrt(fan_in), fan_in = 9, 72,
    144, 32), from torch.manual_seed(seed).
  - loss: softmax cross-entropy, mean over the batch.
  - optimizer: SGD, lr and momentum as given (PyTorch momentum: v = m*v + g; p -= lr*v;
    no dampening, no weight decay, no Nesterov).
  - every epoch: the 8,000 training samples in a fresh random order (torch.Generator seeded
    with seed + epoch), batches of `--batch` (the last, partial batch is used as well;
    8000 = 250 x 32), then accuracy on the 2,000 test samples.
One CPU thread.
"""
import argparse
import os
import struct
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(1)
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def load_mnist(path):
    with open(path, "rb") as f:
        raw = f.read()
    assert raw[:8] == b"TLMNIST1", "bad magic"
    count, rows, cols = struct.unpack_from("<IHH", raw, 8)
    rec = 1 + rows * cols
    assert len(raw) == 16 + count * rec, "bad length"
    a = np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(count, rec)
    labels = torch.from_numpy(a[:, 0].astype(np.int64))
    assert int(labels.max()) <= 9
    x = torch.from_numpy(a[:, 1:].astype(np.float32) / 255.0).reshape(count, 1, rows, cols)
    return x, labels


def w1():
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(1),
        nn.Linear(32, 10),
    )


def accuracy(model, x, y, bs=500):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), bs):
            correct += (model(x[i:i + bs]).argmax(1) == y[i:i + bs]).sum().item()
    model.train()
    return correct / len(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(ROOT, "tests", "data", "mnist10k.bin"))
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cosine", action="store_true",
                    help="per-epoch cosine decay of lr to 0 (CosineAnnealingLR, T_max=epochs)")
    ap.add_argument("--n-train", type=int, default=8000)
    args = ap.parse_args()

    x, y = load_mnist(args.data)
    xtr, ytr = x[:args.n_train], y[:args.n_train]
    xte, yte = x[8000:], y[8000:]

    torch.manual_seed(args.seed)
    model = w1()
    nparams = sum(p.numel() for p in model.parameters())
    assert nparams == 6218, nparams
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs) if args.cosine else None
    print(f"torch {torch.__version__}, W1 {nparams} params, lr {args.lr}, momentum "
          f"{args.momentum}, batch {args.batch}, seed {args.seed}, "
          f"train {len(xtr)}, test {len(xte)}", flush=True)
    print(f"epoch 0: test acc {accuracy(model, xte, yte):.4f}", flush=True)
    accs = []
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        g = torch.Generator().manual_seed(args.seed + epoch)
        perm = torch.randperm(len(xtr), generator=g)
        total, n = 0.0, 0
        for i in range(0, len(xtr), args.batch):
            idx = perm[i:i + args.batch]
            loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
            n += len(idx)
        if sched is not None:
            sched.step()
        acc = accuracy(model, xte, yte)
        accs.append(acc)
        print(f"epoch {epoch}: train loss {total / n:.4f}, test acc {acc:.4f} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
    print("accuracies:", " ".join(f"{a:.4f}" for a in accs))


if __name__ == "__main__":
    main()
