#!/usr/bin/env python3
"""Workload W2 ("mobile-fcn", ../shared/GUIDE.md) in PyTorch: its definition, pretraining on
the 28x28 digits, and export for torchlet (ONNX and safetensors).

    python3 tests/golden/make_w2.py [--epochs 8] [--seed 0] [--out tests/golden/w2]

Writes into --out:
  - w2.onnx: the pretrained model, TorchScript exporter (dynamo=False, opset 17), input
    "input" [N, 1, H, W] with N, H, W dynamic (H, W >= 16), output "logits" [N, 10];
    parameter and buffer initializers keep their state_dict names.
  - w2_pretrained.safetensors: the state_dict (float32; num_batches_tracked as int64).
  - w2_reference.safetensors: eval-mode logits of the pretrained model (PyTorch) for
    held-out digits 0..3 at 28x28 (input_28x28, logits_28x28) and for their central
    20x14 crops (input_20x14, logits_20x14), a size never exported.
  - w2_pretrain.json: the recipe and the measured held-out accuracy, per epoch.

Recipe: records 0..7999 of tests/data/mnist10k.bin train, 8000..9999 test; x = pixel / 255;
SGD lr 0.05, momentum 0.9, batch 32, cosine decay over the epochs; BatchNorm in training
mode during training, eval mode for the test and the export. One CPU thread, seeded.
"""
import argparse
import json
import os
import struct

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
    body = np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(count, rec)
    labels = body[:, 0].astype(np.int64)
    x = body[:, 1:].astype(np.float32).reshape(count, 1, rows, cols) / 255.0
    return torch.from_numpy(x), torch.from_numpy(labels)


class InvertedResidual(nn.Module):
    """expand 1x1 (+BN+ReLU6, absent at expansion 1), depthwise 3x3 (+BN+ReLU6), project 1x1
    (+BN); residual add when the stride is 1 and the channels are equal."""

    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        mid = cin * expand
        layers = []
        if expand != 1:
            layers += [nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU6()]
        layers += [
            nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False),
            nn.BatchNorm2d(mid),
            nn.ReLU6(),
            nn.Conv2d(mid, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        ]
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.conv(x)
        return x + y if self.residual else y


class W2(nn.Module):
    """mobile-fcn: stem conv3x3 s2 (1->8, no bias) + BN + ReLU6; five inverted residual
    blocks; global average pool; dropout 0.1; linear 32->10."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6())
        self.blocks = nn.Sequential(
            InvertedResidual(8, 8, 1, 1),
            InvertedResidual(8, 16, 2, 4),
            InvertedResidual(16, 16, 1, 4),
            InvertedResidual(16, 32, 2, 4),
            InvertedResidual(32, 32, 1, 4),
        )
        self.dropout = nn.Dropout(0.1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        x = x.mean(dim=(2, 3))
        return self.fc(self.dropout(x))


def accuracy(model, x, y):
    model.eval()
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default=os.path.join(ROOT, "tests/data/mnist10k.bin"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests/golden/w2"))
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    x, y = load_mnist(a.data)
    xtr, ytr, xte, yte = x[:8000], y[:8000], x[8000:], y[8000:]
    model = W2()
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, a.epochs * 250)
    history = []
    for epoch in range(a.epochs):
        model.train()
        gen = torch.Generator().manual_seed(a.seed + epoch)
        order = torch.randperm(8000, generator=gen)
        for i in range(0, 8000, 32):
            idx = order[i : i + 32]
            loss = F.cross_entropy(model(xtr[idx]), ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
        acc = accuracy(model, xte, yte)
        history.append(acc)
        print(f"epoch {epoch + 1}: held-out accuracy {100 * acc:.2f}%", flush=True)
    os.makedirs(a.out, exist_ok=True)
    model.eval()
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, os.path.join(a.out, "w2_pretrained.safetensors"))
    torch.onnx.export(
        model,
        (torch.zeros(1, 1, 28, 28),),
        os.path.join(a.out, "w2.onnx"),
        dynamo=False,
        opset_version=17,
        input_names=["input"],
        output_names=["logits"],
        dynamic_axes={"input": {0: "N", 2: "H", 3: "W"}, "logits": {0: "N"}},
        do_constant_folding=False,
        training=torch.onnx.TrainingMode.EVAL,
        keep_initializers_as_inputs=False,
    )
    with torch.no_grad():
        x28 = xte[:4].contiguous()
        x20 = xte[:4, :, 4:24, 7:21].contiguous()
        ref = {"input_28x28": x28, "logits_28x28": model(x28), "input_20x14": x20, "logits_20x14": model(x20)}
    save_file(ref, os.path.join(a.out, "w2_reference.safetensors"))
    with open(os.path.join(a.out, "w2_pretrain.json"), "w") as f:
        json.dump(
            {
                "parameters": n_params,
                "recipe": "SGD lr 0.05 momentum 0.9 batch 32, cosine over the epochs, 8000 train / 2000 held-out 28x28 digits",
                "epochs": a.epochs,
                "seed": a.seed,
                "torch": torch.__version__,
                "held_out_accuracy_per_epoch": history,
            },
            f,
            indent=1,
        )
    print(f"{n_params} parameters; wrote {a.out}")


if __name__ == "__main__":
    main()
